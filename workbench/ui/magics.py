"""IPython magics: ``%load_ext workbench``, then

    %workbench [--runs-dir DIR]                     the dashboard (config, plan, launch & monitor, runs, chat)
    %%workbench_train [--wait] [--name VAR] [--recipe NAME] [--deepspeed FILE] [--set KEY=VALUE] [--section.field VALUE ...]
    <a YAML run configuration>                      launched in a worker process, its monitor shown
    %workbench_runs [--runs-dir DIR]                the runs and their status
    %workbench_chat [--server URL] [--max-tokens N] [--runs-dir DIR] MODEL PROMPT   (quote a PROMPT ending in ?)

The cell of ``%%workbench_train`` is what ``workbench train --config FILE`` reads, and the magic line takes the
command's other inputs (``--recipe``, ``--deepspeed``, ``--set precision.mode=fp16``, ``--lora.r 8``, ``--nproc 2``),
assembled in the same place (``config.assemble``), so a cell and a command line mean the same run. The magics only compose the panels, the launcher and the chat client; nothing here trains in the
kernel, and ipywidgets is imported only by the magics that show a widget.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from ..config import ConfigError, RunConfig, mapping_from_text

DEFAULT_RUNS_DIR = RunConfig().output.runs_dir
# %workbench_chat: options first, then the model, then the prompt as typed (quotes and all)
CHAT_LINE = re.compile(r"^\s*((?:--?[\w-]+(?:=\S+|\s+(?!--)\S+)\s+)*)(\S+)(?:\s+(.*))?$", re.S)


class _HelpShown(Exception):
    """``--help`` was printed: the magic does nothing else."""


class MagicArgumentParser(argparse.ArgumentParser):
    """argparse for a magic line: a bad line is IPython's UsageError (one line, no traceback), not SystemExit."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None):
        if status:
            raise UsageError(message or f"{self.prog}: error")
        raise _HelpShown()


def _train_parser() -> MagicArgumentParser:
    from ..config.assemble import add_run_input_arguments

    p = MagicArgumentParser(
        prog="%%workbench_train",
        description="Launch the run configured by the cell (YAML, "
        "as in workbench train --config), overridden by the flags of this line.",
    )
    p.add_argument("--wait", action="store_true", help="block until the run ends (the monitor keeps drawing)")
    p.add_argument("--timeout", type=float, default=None, help="with --wait: give up waiting after this many seconds")
    p.add_argument(
        "--name", metavar="VAR", help="store the run's monitor (.handle: status, stop, wait) in this variable"
    )
    add_run_input_arguments(p, config_file=False)
    return p


def train_config(line: str, cell: str) -> tuple[RunConfig, argparse.Namespace]:
    """The RunConfig of a ``%%workbench_train`` cell: the line's --recipe, the cell's YAML, the line's --deepspeed,
    --set overrides and --section.field flags, assembled as ``workbench train`` assembles its inputs
    (``config.assemble``); the DeepSpeed importer's warnings are printed. A recipe this machine cannot run is
    refused, as the command refuses it."""
    from ..config.assemble import assemble_settings, run_inputs

    args = _train_parser().parse_args(shlex.split(line))
    assembled = assemble_settings(run_inputs(args, mapping_from_text(cell, "the cell", "%%workbench_train")))
    for notice in assembled.notices():
        print(notice)
    cfg = assembled.config()
    if assembled.recipe is not None:
        from ..hardware import machine_memory

        if unmet := assembled.recipe.requirements.unmet(*machine_memory()):
            raise ConfigError([("--recipe", f"recipe {args.recipe} {unmet}")])
    return cfg, args


def _runs_dir_parser(prog: str, description: str, usage: str | None = None) -> MagicArgumentParser:
    p = MagicArgumentParser(prog=prog, description=description, usage=usage)
    p.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR, help=f"the runs directory (default: {DEFAULT_RUNS_DIR})")
    return p


def _chat_parser() -> MagicArgumentParser:
    p = _runs_dir_parser(
        "%workbench_chat",
        "Ask MODEL the rest of the line. MODEL is a run (a run directory, or "
        "a run's name in --runs-dir) or a built-in model, served from this kernel, or with --server "
        "(or $WORKBENCH_SERVE_URL) a model id of a running server.",
        usage="%%workbench_chat [--server URL] [--max-tokens N] [--runs-dir DIR] MODEL PROMPT",
    )
    p.add_argument("--server", metavar="URL", help="an OpenAI-compatible server's base URL (http://HOST:PORT/v1)")
    p.add_argument("--max-tokens", type=int, default=128, help="answer length cap (default: 128)")
    return p


def split_chat_line(line: str) -> tuple[str, str, str]:
    """``%workbench_chat``'s line as (options, model, prompt). The prompt is the rest of the line as typed, or
    what a quoted prompt holds: a line ending in ``?`` must quote it, or IPython reads the ``?`` as a help
    request before the magic sees the line."""
    match = CHAT_LINE.match(line)
    if not match or not (match.group(3) or "").strip():
        raise UsageError("%workbench_chat: give a model and a prompt: %workbench_chat [options] MODEL PROMPT")
    options, model, prompt = match.group(1), match.group(2), match.group(3).strip()
    if len(prompt) >= 2 and prompt[0] == prompt[-1] and prompt[0] in "\"'":
        try:
            words = shlex.split(prompt)
        except ValueError:  # unbalanced quotes inside: the text as typed
            words = []
        if len(words) == 1:
            prompt = words[0]
    return options, model, prompt


@magics_class
class WorkbenchMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        self.monitors: list = []  # every run launched from this kernel keeps its monitor (and its poller) alive
        self.servers: dict[str, Any] = {}  # base model (and its quantization) -> ServerHandle for %workbench_chat

    @staticmethod
    def _parse(parser: MagicArgumentParser, line: str) -> argparse.Namespace | None:
        try:
            return parser.parse_args(shlex.split(line))
        except _HelpShown:
            return None

    @line_magic
    def workbench(self, line: str = ""):
        """Show the Workbench dashboard: ``%workbench [--runs-dir DIR]``."""
        args = self._parse(_runs_dir_parser("%workbench", "Show the Workbench dashboard."), line)
        if args is None:
            return
        from IPython.display import display

        from .dashboard_panel import Workbench

        display(Workbench(runs_dir=args.runs_dir))

    @cell_magic
    def workbench_train(self, line: str, cell: str):
        """Launch the cell's YAML run configuration (overrides on the line) and show its monitor."""
        try:
            cfg, args = train_config(line, cell)
        except _HelpShown:
            return
        except ConfigError as err:
            raise UsageError(str(err)) from None
        from IPython.display import display

        from .monitor_panel import RunMonitor

        monitor = RunMonitor()
        display(monitor)
        monitor.launch(cfg)
        self.monitors.append(monitor)
        if args.name:
            self.shell.user_ns[args.name] = monitor
        if args.wait:
            state = monitor.wait_sync(timeout=args.timeout)
            print(f"run {state.status}: {monitor.handle.run_dir}")

    @line_magic
    def workbench_runs(self, line: str = ""):
        """List the runs and their status: ``%workbench_runs [--runs-dir DIR]``."""
        args = self._parse(_runs_dir_parser("%workbench_runs", "List the runs and their status."), line)
        if args is not None:
            from ..runs import runs_table

            print(runs_table(args.runs_dir))

    @line_magic
    def workbench_chat(self, line: str = ""):
        """Ask a model: ``%workbench_chat [--server URL] [--max-tokens N] [--runs-dir DIR] MODEL PROMPT``."""
        import os

        from ..serve.client import chat

        if line.split()[:1] in (["-h"], ["--help"]):
            _chat_parser().print_help()
            return
        options, model, prompt = split_chat_line(line)
        args = self._parse(_chat_parser(), options)
        if args is None:
            return
        server_url = args.server or os.environ.get("WORKBENCH_SERVE_URL")
        if server_url:
            connection = {"base_url": server_url}
        else:
            server, model = self._local_server(model, Path(args.runs_dir))
            connection = {"server": server}
        print(f"{model}: ", end="", flush=True)  # the answer streams after the name of who gives it
        chat(model, prompt, max_tokens=args.max_tokens, **connection)

    def _local_server(self, model: str, runs_dir: Path):
        """A server in this kernel for ``model`` (a run: its base with its adapter; a built-in model: itself),
        started once per base model; returns it and the model id to ask."""
        from ..models import BUILTIN
        from ..runs import base_model, has_adapter, is_run_dir, run_config
        from ..serve import start_server

        run_dir = next((p for p in (Path(model), runs_dir / model) if is_run_dir(p)), None)
        if run_dir is None:
            if model not in BUILTIN:
                raise UsageError(
                    f"%workbench_chat: {model!r} is neither a run (a run directory, or a run in "
                    f"{runs_dir}/) nor a built-in model ({', '.join(BUILTIN)}); to ask a running "
                    "server, give --server URL"
                )
            if model not in self.servers:
                self.servers[model] = start_server(model)
            return self.servers[model], model
        if not has_adapter(run_dir):
            raise UsageError(
                f"%workbench_chat: the run {str(run_dir)!r} holds no LoRA adapter (adapter/): has it "
                "finished? (a full fine-tune's model/ is served with `workbench serve --model DIR`)"
            )
        base = base_model(run_dir)
        quantized = run_config(run_dir).quantization.base
        # a run over a quantized base (quantization.base) is served on that base quantized the same way: its own server
        key = base if quantized == "none" else f"{base} ({quantized})"
        served = self.servers.get(key)
        if served is None:
            self.servers[key] = start_server(base, runs=[str(run_dir)])
        elif run_dir.name not in served.models():
            served.add_adapter(run_dir.name, run_dir)
        return self.servers[key], run_dir.name


def load_ipython_extension(ipython) -> None:
    """``%load_ext workbench``: register the magics."""
    ipython.register_magics(WorkbenchMagics)


__all__ = ["WorkbenchMagics", "load_ipython_extension", "split_chat_line", "train_config"]
