"""``workbench eval``: task metrics of served models (registered by workbench.cli.main)."""

from __future__ import annotations

import argparse
import json
import sys

from ..runs import existing_trained
from ..user_output import table_cell, text_table


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .registry import get_task, task_names

    tasks = "; ".join(f"{n}: {get_task(n).description}" for n in task_names())
    p = subparsers.add_parser(
        "eval",
        help="score served models (base and adapters) on a task set: phone actions, identity, text",
        description="Ask a running server (--server URL) or one started here (--run runs/NAME [--base MODEL]) the "
        "rows of a task set, score every answer and print the metrics per model; the results are "
        f"stored in each evaluated adapter's run directory (eval_results.json). Tasks: {tasks}.",
    )
    p.add_argument("--task", required=True, choices=task_names(), help="the task to score")
    p.add_argument(
        "--server",
        metavar="URL",
        help="a running server (http://HOST:PORT); without it, one is started for --base and the adapters of --run",
    )
    p.add_argument(
        "--model", action="append", metavar="ID", help="a served model id (repeatable; default: every served id)"
    )
    p.add_argument(
        "--run",
        action="append",
        default=[],
        type=existing_trained,
        metavar="runs/NAME",
        help="without --server: serve what this run trained (repeatable): its adapter on the base, or its "
        "full fine-tune (model/) beside the base, under the run's name; a run's merged/ or exports/NAME "
        "directory likewise",
    )
    p.add_argument("--base", metavar="MODEL", help="without --server: the base model (default: the runs' base)")
    p.add_argument(
        "--data",
        metavar="FILE",
        help="a chat or instruction JSONL file instead of the task's held-out set "
        "(heldout_loss: default the runs' own data.eval, so the figure is their eval loss)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="only the first N rows")
    p.add_argument(
        "--enable-thinking",
        choices=("on", "off", "both"),
        help="pass enable_thinking to the chat "
        "template (both: score each model with and without); default: the template's default",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 (the default) decodes greedily: deterministic")
    p.add_argument("--seed", type=int, help="seed of each sampled request (with --temperature > 0)")
    p.add_argument("--max-tokens", type=int, default=96, help="answer length limit (default 96)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    p.add_argument("--system-prompt", help="system message for rows without one (as data.system_prompt in training)")
    p.add_argument("--api-key", help="the server's API key (default: $WORKBENCH_API_KEY)")
    p.add_argument(
        "--device",
        default="auto",
        help="where the models started here answer: auto (the first CUDA GPU "
        "when one is visible, else the CPU), cpu, cuda or cuda:N; refused before loading when the planner "
        "says a model does not fit there",
    )
    p.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16", "float16"),
        help="their weights' dtype; auto: what precision.mode auto trains in on that device",
    )
    p.add_argument("--no-write", action="store_true", help="do not write eval_results.json into the run directories")
    p.add_argument("--json", action="store_true", help="print the whole report (with every answer) as JSON")
    p.add_argument(
        "--allow-errors",
        action="store_true",
        help="exit 0 even when requests failed (the metrics "
        "are over the answered rows only either way; each model's failures are counted and shown)",
    )
    return p


def run(args) -> int:
    import os

    from ..config import ConfigError
    from ..data import DataError
    from ..serve.config import ServeError
    from .runner import EvalError, evaluate

    if args.server is None and not args.run and not args.base:
        print(
            "workbench eval: error: give --server URL, or --run runs/NAME / --base MODEL to start a server",
            file=sys.stderr,
        )
        return 2
    try:
        report = evaluate(
            args.task,
            args.model,
            server=args.server,
            base=args.base,
            runs=args.run,
            data=args.data,
            limit=args.limit,
            enable_thinking=args.enable_thinking,
            temperature=args.temperature,
            seed=args.seed,
            max_tokens=args.max_tokens,
            concurrency=args.concurrency,
            system_prompt=args.system_prompt,
            api_key=args.api_key or os.environ.get("WORKBENCH_API_KEY"),
            write=not args.no_write,
            progress=sys.stderr.isatty(),
            device=args.device,
            dtype=args.dtype,
        )
    except (EvalError, DataError, ConfigError, ServeError) as err:
        print(f"workbench eval: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    else:
        print(format_report(report))
    if report.failed and not args.allow_errors:
        # a table over fewer rows than asked is no result to act on: scripts and CI must notice
        print(
            f"workbench eval: error: {report.failed} request(s) failed (see 'failed' and the reasons above); the "
            "metrics cover the answered rows only. Fix the cause, or pass --allow-errors to accept them",
            file=sys.stderr,
        )
        return 1
    return 0


def format_report(report) -> str:
    """The metrics as a table: one row per model and thinking mode, one column per scalar metric (``n``: the
    answered rows they are over, ``failed``: requests without an answer), then each model's failure reasons."""
    rows = [(m, mode, metrics) for m, by_mode in report.metrics.items() for mode, metrics in by_mode.items()]
    keys = [k for k, v in rows[0][2].items() if not isinstance(v, (dict, list))] if rows else []
    table = [["model", "thinking", *keys]] + [
        [m, mode, *(table_cell(metrics.get(k)) for k in keys)] for m, mode, metrics in rows
    ]
    lines = text_table(table)
    for m, mode, metrics in rows:
        if metrics.get("failed"):
            lines.append(
                f"{m} ({mode}): {metrics['failed']} of {metrics['failed'] + metrics['n']} requests failed, "
                "not scored; first reasons:"
            )
            lines += [f"  - {reason}" for reason in metrics.get("errors", [])]
    lines += _by_type(rows)
    answered = "the answered rows only (n)" if report.failed else "every row"
    lines.append(
        f"task {report.task} on {report.settings['n']} rows of {report.data}; metrics over {answered}; "
        f"{report.wall_s:.1f} s"
    )
    if report.settings.get("rules"):
        lines.append(f"rules: {report.settings['rules']}")
    lines += [f"written: {p}" for p in report.written]
    return "\n".join(lines)


def _by_type(rows: list) -> list[str]:
    """The per-action-type figures (a phone task's ``by_type``) as a table: a row per model and mode, a column per
    expected action type holding ``n: type match / exact match``; nothing for a task without them."""
    kinds = sorted({k for _, _, metrics in rows for k in metrics.get("by_type") or {}})
    if not kinds:
        return []

    def cell(group) -> str:
        if not group:
            return "-"
        return f"{group['n']}: {table_cell(group.get('type_match', group.get('type_accuracy')))} / {table_cell(group['exact_match'])}"

    table = [["model", "thinking", *kinds]] + [
        [m, mode, *(cell((metrics.get("by_type") or {}).get(k)) for k in kinds)] for m, mode, metrics in rows
    ]
    return ["per expected action type (rows: type match / exact match):"] + text_table(table)
