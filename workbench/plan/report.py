"""Predicted vs measured memory of a finished (or running) run, from its event log alone.

    workbench report runs/NAME

The run's ``plan`` event holds the planner's prediction; its ``memory`` events hold what each rank
measured. Model state is compared on the last memory event after a backward: each carries the gradients' bytes
at its step's peak (they exist only between backward and the optimizer step)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..events import read_events
from ..runs.layout import EVENTS_FILE
from .model_state import MEASURED_NAMES, compare, format_comparison


def run_report(run_dir: str | Path) -> dict:
    """{rank: [ComparisonRow]} for every rank that measured its model state after a backward."""
    events, _ = read_events(Path(run_dir) / EVENTS_FILE)
    plans = [e for e in events if getattr(e, "type", "") == "plan"]
    if not plans or "model_state" not in plans[-1].plan:
        raise ValueError(f"{run_dir} has no plan event with a model-state prediction")
    predicted = plans[-1].plan["model_state"]
    latest: dict = {}
    for e in events:
        if getattr(e, "type", "") == "memory" and e.grads_bytes > 0:
            latest[e.rank] = e
    return {
        rank: compare(predicted, {k: getattr(m, v) for k, v in MEASURED_NAMES.items()})
        for rank, m in sorted(latest.items())
    }


def quantized_base_line(run_dir: str | Path) -> str | None:
    """What a run over a quantized base (quantization.base) quantized, measured against the plan's census; None for
    a run over a 16-bit base."""
    events, _ = read_events(Path(run_dir) / EVENTS_FILE)
    done = [e for e in events if getattr(e, "type", "") == "base_quantized"]
    if not done:
        return None
    q = done[-1]
    plans = [e for e in events if getattr(e, "type", "") == "plan"]
    planned = (plans[-1].plan.get("census") or {}).get("quantized_bytes") if plans else None
    mib = 2**20
    return (
        f"quantized base {q.kind}: {q.layers} linear layers, {q.weights:,} weights, {q.bytes_before / mib:,.2f} MiB "
        f"-> {q.bytes_after / mib:,.2f} MiB measured"
        + (f", {planned / mib:,.2f} MiB planned" if planned else "")
        + f" (computing in {q.compute_dtype})"
    )


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("report", help="a run's predicted vs measured model-state memory, per category")
    from ..runs import existing_run_dir

    p.add_argument("run_dir", type=existing_run_dir)
    p.add_argument("--json", action="store_true")
    return p


def run(args) -> int:
    try:
        report = run_report(args.run_dir)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}")
        return 2
    if not report:
        print(f"{args.run_dir}: no memory event after a backward yet (no step finished)")
        return 1
    if args.json:
        print(json.dumps({rank: [r.to_dict() for r in rows] for rank, rows in report.items()}, indent=2))
        return 0
    quantized = quantized_base_line(args.run_dir)
    if quantized:
        print(quantized)
    for rank, rows in report.items():
        print(f"rank {rank}")
        print(format_comparison(rows))
    return 0
