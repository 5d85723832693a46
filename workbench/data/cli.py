"""``workbench data check FILE`` and ``workbench data merge``: lint training files, merge them into one (registered by
workbench.cli.main)."""
from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("data", help="check training files before a run reads them",
                              description="Tools for training data.")
    sub = p.add_subparsers(dest="data_command", required=True, metavar="{check,merge}")
    c = sub.add_parser(
        "check", help="lint JSONL training files: every problem as file:line: why (exit 1 when there is one)",
        description="Check each row: JSON and a chat or instruction row; images exist and open; phone-action answers "
                    "parse (AutoGLM-Phone's grammar, points on the 0-999 grid) and taps land inside meta.target_box; "
                    "rows in AutoGLM's runtime format (meta.format autoglm-runtime) conform to it; with --model, the "
                    "row's tokens (images included) fit the context.")
    c.add_argument("files", nargs="+", metavar="FILE", help="JSONL training files")
    c.add_argument("--model", metavar="MODEL", help="count tokens with this model's tokenizer (a built-in name, a local "
                   "directory or a hub id; its weights are not loaded)")
    c.add_argument("--max-length", type=int, metavar="N", help="with --model: the context to fit (default: the "
                   "model's; 25480 is Open-AutoGLM's recommended server context)")
    c.add_argument("--actions", choices=("auto", "all", "none"), default="auto",
                   help="which rows hold phone actions to check (default auto: rows with meta.target_box, the runtime "
                        "format, or answers written as <answer>/do(...)/finish(...))")
    c.set_defaults(func=run_check)
    m = sub.add_parser(
        "merge", help="merge training files into one (e.g. demonstrations into an agent's rows)",
        description="Check every input as `workbench data check` does (nothing is written while one has a problem), "
                    "then write their rows, in order, to one file; image paths relative to an input's folder are "
                    "rewritten relative to the output's folder.")
    m.add_argument("files", nargs="+", metavar="FILE", help="JSONL training files")
    m.add_argument("--out", required=True, metavar="OUT.jsonl", help="the merged file (a new file, not an input)")
    m.add_argument("--repeat", action="append", default=[], metavar="FILE=N",
                   help="write FILE's rows N times (repeatable): a few demonstrations among thousands of rows")
    m.set_defaults(func=run_merge)
    return p


def run_merge(args) -> int:
    from .merge import merge_files

    repeat, problems = {}, []
    for item in args.repeat:
        name, sep, count = item.rpartition("=")
        if not sep or not count.isdigit():
            problems.append(f"--repeat {item!r}: give FILE=N, N a whole number")
        else:
            repeat[name] = int(count)
    if not args.out.endswith(".jsonl"):
        problems.append(f"--out {args.out!r}: give a .jsonl file name")
    if not problems:
        merged = merge_files(args.out, args.files, repeat)
        problems = merged.problems
    if problems:
        for line in problems:
            print(line)
        print(f"workbench data merge: error: {len(problems)} problem(s); nothing written", file=sys.stderr)
        return 1
    for path, (rows, times) in merged.per_file.items():
        print(f"{path}: {rows} rows" + (f" x {times}" if times > 1 else ""))
    print(f"{merged.rows} rows: {merged.path}")
    return 0


def run_check(args) -> int:
    from ..config import ConfigError
    from .check import check_file

    if args.max_length is not None and args.max_length < 1:
        print(f"workbench data check: error: --max-length: must be at least 1 (got {args.max_length})", file=sys.stderr)
        return 2
    tokenizer = None
    if args.model:
        from ..models import load_tokenizer

        try:
            tokenizer = load_tokenizer(args.model)
        except ConfigError as err:
            print(f"workbench data check: error: --model: {err}", file=sys.stderr)
            return 2
    total = 0
    for path in args.files:
        report = check_file(path, tokenizer, args.max_length, args.actions)
        for line in report.problems:
            print(line)
        total += len(report.problems)
        longest = f", longest {report.longest} tokens" if tokenizer is not None and report.rows else ""
        print(f"{path}: {report.rows} rows, {len(report.problems)} problem(s){longest}", file=sys.stderr)
    return 1 if total else 0
