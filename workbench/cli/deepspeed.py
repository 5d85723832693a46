"""``workbench deepspeed import FILE [--world-size N]`` (DeepSpeed JSON -> RunConfig YAML, with the importer's
warnings) and ``workbench deepspeed export [CONFIG] [--set K=V] [--no-bf16]`` (RunConfig -> DeepSpeed JSON)
(registered by workbench.cli.main)."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "deepspeed",
        help="DeepSpeed JSON <-> run configuration",
        description="import: a DeepSpeed config JSON as run-configuration YAML, with warnings "
        "where DeepSpeed would not do what it says; export: the DeepSpeed JSON of a run "
        "configuration, precision resolved for GPUs",
    )
    sub = p.add_subparsers(dest="deepspeed_command", required=True)
    i = sub.add_parser("import", help="DeepSpeed JSON -> RunConfig YAML (with warnings)")
    i.add_argument("file")
    i.add_argument("--world-size", type=int, default=None, help="the processes train_batch_size is split over")
    e = sub.add_parser("export", help="RunConfig (YAML/JSON) -> DeepSpeed JSON")
    e.add_argument("config", nargs="?")
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override, repeatable")
    e.add_argument("--no-bf16", action="store_true", help="the target GPUs lack bf16 (precision auto -> fp16)")
    return p


def run(args) -> int:
    return _import(args) if args.deepspeed_command == "import" else _export(args)


def _import(args) -> int:
    import yaml

    from ..config import apply_overrides
    from ..config.deepspeed_import import import_deepspeed_file

    result = import_deepspeed_file(args.file, args.world_size, "file")  # a ConfigError: main prints it, exit 2
    print(yaml.safe_dump(apply_overrides({}, result.overrides), sort_keys=False), end="")
    for key, msg in result.warnings:
        print(f"WARNING {key}: {msg}")
    for key, msg in result.notes:
        print(f"note {key}: {msg}")
    return 0


def _export(args) -> int:
    from ..config import load_config
    from ..distributed.ds_config import export_notes, to_deepspeed_config
    from ..hardware import Hardware
    from ..precision import resolve_policy

    cfg = load_config(args.config, args.set)
    # The file is for the user's GPUs, not this machine: resolve precision for them.
    policy = resolve_policy(cfg.precision, Hardware.gpu(bf16=not args.no_bf16), cfg.lora.enabled, cfg.model.dtype)
    print(json.dumps(to_deepspeed_config(cfg, policy), indent=2))
    for note in policy.notes + tuple(export_notes(cfg)):
        print(f"note: {note}", file=sys.stderr)
    return 0
