"""``workbench serve``: argparse wiring (the lead registers it with ``add_parser(subparsers)``)."""
from __future__ import annotations

import argparse
import os
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="serve a base model and its LoRA adapters over an OpenAI-compatible API",
        description="Serve one base model plus any number of LoRA adapters (each under its own model id) over an "
                    "OpenAI-compatible HTTP API: /health, /v1/models, /v1/chat/completions, /v1/completions.")
    configure_parser(p)
    p.set_defaults(func=run)
    return p


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2-135m-instruct",
                   help="base model: a built-in name (see `workbench models`), a local HF directory or a hub id "
                        "(default: %(default)s)")
    p.add_argument("--model-id", default=None, help="id clients use for the base model (default: --model)")
    p.add_argument("--adapter", action="append", default=[], metavar="NAME=PATH",
                   help="serve a peft adapter (or a run directory) under model id NAME; repeatable")
    p.add_argument("--run", action="append", default=[], metavar="runs/NAME",
                   help="serve a training run's adapter under the run's name; its config.json must name this base "
                        "model; repeatable")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s; 0 picks a free one)")
    p.add_argument("--api-key", default=None,
                   help="require this bearer key on generation endpoints (default: $WORKBENCH_API_KEY, else none); "
                        "/health and /v1/models stay public")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="weights dtype (default: %(default)s; on a CPU use float32 or bfloat16)")
    p.add_argument("--max-batch", type=int, default=16, help="requests decoded together (default: %(default)s)")
    p.add_argument("--max-context", type=int, default=None,
                   help="context length in tokens (default: the model's max_position_embeddings)")
    p.add_argument("--default-max-tokens", type=int, default=None,
                   help="completion length when a request names none (default: fill the context)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def config_from_args(args):
    from .runtime import ServeConfig, add_run_adapters

    adapters: dict[str, str] = {}
    for spec in args.adapter:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"workbench serve: --adapter takes NAME=PATH, got {spec!r}")
        adapters[name] = path
    add_run_adapters(adapters, args.run)
    return ServeConfig(model=args.model, model_id=args.model_id, dtype=args.dtype, adapters=adapters, host=args.host,
                       port=args.port, api_key=args.api_key or os.environ.get("WORKBENCH_API_KEY") or None,
                       max_batch=args.max_batch, max_context=args.max_context,
                       default_max_tokens=args.default_max_tokens, threads=args.threads)


def check_adapters(config) -> None:
    """Fail fast, before the model loads, on adapters that cannot be served."""
    from .runtime import ServeError, adapter_dir, run_base_mismatch

    for name, path in config.adapters.items():
        try:
            _, run_config = adapter_dir(path)
        except ServeError as err:
            raise SystemExit(f"workbench serve: {err}") from None
        base = run_base_mismatch(run_config or None, config.model)
        if base:
            raise SystemExit(f"workbench serve: adapter {name!r} ({path}) was trained on {base!r}, but the served "
                             f"base is {config.model!r}; pass --model {base}")


def run(args) -> int:
    from .server import serve_forever

    config = config_from_args(args)
    check_adapters(config)
    try:
        serve_forever(config, log_level=args.log_level)
    except KeyboardInterrupt:
        pass
    except OSError as err:  # e.g. the port is taken
        print(f"workbench serve: {err}", file=sys.stderr)
        return 1
    return 0
