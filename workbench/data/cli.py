"""``workbench data check FILE``: lint training files; ``workbench data merge``: merge them into one; ``workbench data
convert FILE OUT``: rewrite legacy agent rows into Open-AutoGLM's runtime format (registered by workbench.cli.main)."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "data", help="check training files before a run reads them", description="Tools for training data."
    )
    sub = p.add_subparsers(dest="data_command", required=True, metavar="{check,merge,convert}")
    c = sub.add_parser(
        "check",
        help="lint JSONL training files: every problem as file:line: why (exit 1 when there is one)",
        description="Check each row: JSON and a chat or instruction row; images exist and open; phone-action answers "
        "parse (AutoGLM-Phone's grammar, points on the 0-999 grid) and taps land inside meta.target_box; "
        "rows in Open-AutoGLM's runtime format (meta.format open-autoglm) conform to it, byte for byte; "
        "with --model, the row's tokens (images included) fit the context. It says which form each file's "
        "rows have (runtime, legacy, other).",
    )
    c.add_argument("files", nargs="+", metavar="FILE", help="JSONL training files")
    c.add_argument(
        "--model",
        metavar="MODEL",
        help="count tokens with this model's tokenizer (a built-in name, a local "
        "directory or a hub id; its weights are not loaded)",
    )
    c.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        help="with --model: the context to fit (default: the "
        "model's; 25480 is Open-AutoGLM's recommended server context)",
    )
    c.add_argument(
        "--actions",
        choices=("auto", "all", "none"),
        default="auto",
        help="which rows hold phone actions to check (default auto: rows with meta.target_box, the runtime "
        "format, or answers written as <answer>/do(...)/finish(...))",
    )
    c.set_defaults(func=run_check)
    v = sub.add_parser(
        "convert",
        help="rewrite agent rows of the legacy form into Open-AutoGLM's runtime format",
        description="Rewrite rows of the legacy form (meta.format autoglm-runtime: the workbench's own system prompt, "
        "replies closed by </answer>) into Open-AutoGLM's runtime format: its system prompt for the row's "
        "date, the reply to learn as <think>..</think>\\n<answer>do(...), the earlier replies as the runtime "
        "keeps them. Screens, app names and actions stay as recorded; images are read from beside FILE, so "
        "write OUT next to it (or copy its images/ folder).",
    )
    v.add_argument("file", metavar="FILE", help="a JSONL file of legacy rows")
    v.add_argument("out", metavar="OUT", help="the JSONL file to write")
    v.add_argument(
        "--lang", choices=("cn", "en"), default="en", help="the runtime's system prompt to use (its --lang; default en)"
    )
    v.set_defaults(func=run_convert)
    m = sub.add_parser(
        "merge",
        help="merge training files into one (e.g. demonstrations into an agent's rows)",
        description="Check every input as `workbench data check` does (nothing is written while one has a problem), "
        "then write their rows, in order, to one file; image paths relative to an input's folder are "
        "rewritten relative to the output's folder.",
    )
    m.add_argument("files", nargs="+", metavar="FILE", help="JSONL training files")
    m.add_argument("--out", required=True, metavar="OUT.jsonl", help="the merged file (a new file, not an input)")
    m.add_argument(
        "--repeat",
        action="append",
        default=[],
        metavar="FILE=N",
        help="write FILE's rows N times (repeatable): a few demonstrations among thousands of rows",
    )
    m.set_defaults(func=run_merge)
    return p


def run_convert(args) -> int:
    import json
    from pathlib import Path

    from ..config.files import UnreadableFile, read_jsonl
    from ..phone.conversation import legacy_rows

    source, out = Path(args.file), Path(args.out)
    try:
        rows = read_jsonl(source)
        converted = legacy_rows(rows, args.lang)
    except UnreadableFile as err:  # names the file (and the line)
        print(f"workbench data convert: error: {err}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as err:
        print(f"workbench data convert: error: {source}: {err}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in converted), encoding="utf-8")
    print(f"{out}: {len(converted)} rows in Open-AutoGLM's runtime format (lang {args.lang})")
    return 0


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
        if report.forms:
            print(f"{path}: {report.forms_line()}", file=sys.stderr)
    return 1 if total else 0
