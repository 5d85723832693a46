"""``workbench serve``: flags generated from ServeConfig (``add_parser(subparsers)`` registers the subcommand)."""

from __future__ import annotations

import argparse
import os
import sys

from ..config import ConfigError, apply_overrides, config_from_dict, read_config_file
from ..config.flags import add_config_arguments, overrides_from_args
from .config import ServeConfig, ServeError


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve",
        help="serve a base model and its LoRA adapters over an OpenAI-compatible API",
        description="Serve one base model plus any number of LoRA adapters (each under its own model id) over an "
        "OpenAI-compatible HTTP API: /health, /v1/models, /v1/chat/completions, /v1/completions. "
        "Values parse as YAML (--max-context null); every bad option is reported at once.",
    )
    configure_parser(p)
    p.set_defaults(func=run)
    return p


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        help="YAML or JSON serve configuration (the keys are the flags' names with underscores); flags override it",
    )
    add_config_arguments(p, ServeConfig, dashes=True)
    p.add_argument(
        "--print-command",
        action="store_true",
        help="with --engine vllm or llama-cpp: print the vLLM (llama-server) command line "
        "these options make (to run it yourself, e.g. in your own container) and exit",
    )


def config_from_args(args) -> ServeConfig:
    """The validated configuration of ``--config`` and the flags; ConfigError naming every bad option."""
    from .server import API_KEY_ENV

    data = _read_file(args.config) if args.config else {}
    data = apply_overrides(data, overrides_from_args(args, ServeConfig))
    if data.get("api_key") is None and os.environ.get(API_KEY_ENV):
        data["api_key"] = os.environ[API_KEY_ENV]
    return config_from_dict(data, ServeConfig)


def _read_file(path: str) -> dict:
    try:
        return read_config_file(path)
    except ConfigError as err:  # it says "run configuration"
        raise ConfigError(err.problems, ServeConfig.config_title) from None


def run(args) -> int:
    from .server import serve_forever

    try:
        config = config_from_args(args)
        if config.engine == "vllm":
            from . import vllm

            return vllm.serve_forever(config, print_command=args.print_command)
        if config.engine == "llama-cpp":
            from . import llama_cpp

            return llama_cpp.serve_forever(config, print_command=args.print_command)
        serve_forever(config)
    except KeyboardInterrupt:
        pass
    except (ConfigError, ServeError) as err:  # bad options, or a model / adapter that does not load: input
        print(f"workbench serve: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. the port is taken
        print(f"workbench serve: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # loading failed for another reason (logged above with its traceback)
        print(f"workbench serve: the model failed to load: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0
