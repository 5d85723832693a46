"""Measured model-state bytes per rank, per strategy, next to the planner's prediction.

    python -m workbench.bench.strategy_memory [--nproc 2] [--precision fp32|bf16] [--model tiny-glm4]

Runs every strategy for 2 optimizer steps on 2 gloo ranks (tiny model, CPU) and prints, per rank,
the bytes measured by ``workbench.plan.measure_model_state`` at step 2 (after backward, gradients
still allocated, optimizer state from step 1) against ``predict_for_run``'s per-rank figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from ..plan import MEASURED_NAMES, STATE_CATEGORIES

SETTINGS = {
    "none": {"sharding.strategy": "none"},
    "ddp": {"sharding.strategy": "ddp"},
    "fsdp-zero2": {"sharding.strategy": "fsdp", "sharding.fsdp_stage": "zero2"},
    "fsdp-zero3": {"sharding.strategy": "fsdp", "sharding.fsdp_stage": "zero3"},
    "deepspeed-1": {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 1},
    "deepspeed-2": {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 2},
    "deepspeed-3": {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 3},
}


def measure(name: str, runs_dir: Path, nproc: int, precision: str, model: str, train_file: str) -> dict:
    from ..config import load_config, single_process
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE
    from ..training import launch, train

    overrides = {
        "model.source": model,
        "data.train": train_file,
        "data.eval": None,
        "data.max_length": 64,
        "schedule.max_steps": 2,
        "schedule.micro_batch_size": 2,
        "schedule.warmup_steps": 0,
        "schedule.eval_loss_every": 0,
        "precision.mode": precision,
        "device": "cpu",
        "output.runs_dir": str(runs_dir),
        "output.run_name": name,
        "output.progress_bar": False,
        "output.memory_every": 1,
        **SETTINGS[name],
    }
    one_process = single_process(SETTINGS[name]["sharding.strategy"])
    if not one_process:
        overrides["sharding.nproc_per_node"] = nproc
    cfg = load_config(None, overrides)
    if one_process:
        run_dir = train(cfg).run_dir
    else:
        handle = launch(cfg)
        if handle.wait(900) != "finished":
            raise RuntimeError(f"{name}: run {handle.status()}; see {handle.run_dir}/worker.log")
        run_dir = handle.run_dir
    events = list(iter_events(run_dir / EVENTS_FILE, typed=False))
    plan = next(e for e in events if e["type"] == "plan")["plan"]
    measured = {}
    for e in events:
        # The first step-2 memory event: taken after backward (gradients allocated); the run's closing one has none.
        if e["type"] == "memory" and e["step"] == 2 and e["rank"] not in measured:
            measured[e["rank"]] = {k: e[v] for k, v in MEASURED_NAMES.items()}
    return {
        "name": name,
        "measured": measured,
        "predicted": plan.get("model_state", {}),
        "label": plan.get("label"),
        "error": plan.get("error"),
    }


def format_rows(results: list[dict]) -> str:
    lines = [f"{'strategy':<13}{'category':<17}{'rank 0':>11}{'rank 1':>11}{'planner':>11}{'vs none':>9}"]
    base = next((r["measured"][0] for r in results if r["name"] == "none"), None)
    for r in results:
        for cat in (*STATE_CATEGORIES, "total"):
            got = [sum(m.values()) if cat == "total" else m[cat] for _, m in sorted(r["measured"].items())]
            pred = r["predicted"].get(cat, "-")
            ref = (sum(base.values()) if cat == "total" else base[cat]) if base else 0
            ratio = f"{got[0] / ref:.2f}x" if ref else "-"
            cells = "".join(f"{g:>11,}" for g in got) + " " * 11 * (2 - len(got))
            lines.append(
                f"{r['name'] if cat == 'weights' else '':<13}{cat:<17}{cells}"
                f"{pred if isinstance(pred, str) else f'{pred:,}':>11}{ratio:>9}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.bench.strategy_memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--model", default="tiny-glm4")
    ap.add_argument("--train", default=str(Path(__file__).resolve().parents[2] / "data_samples/identity/train.jsonl"))
    ap.add_argument("--strategies", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--runs-dir", default=None, help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        runs_dir = Path(args.runs_dir or tmp)
        results = []
        for name in args.strategies:
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results.append(measure(name, runs_dir, args.nproc, args.precision, args.model, args.train))
    print(json.dumps(results, indent=2) if args.json else format_rows(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
