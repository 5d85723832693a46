"""LoRA over a quantized base against LoRA over the 16-bit base: the base's weights bytes and the step time, nf4 and
int8 vs bf16, one run each on this machine, printed.

    python -m workbench.bench.qlora [--recipe identity-demo] [--steps 8] [--warmup 2] [--set KEY=VALUE ...]

Each contender is the recipe's run (the engine, every event on) with ``quantization.base`` none, nf4 or int8, in its
own subprocess, one after another (they do not share the cores), for ``--warmup`` + ``--steps`` optimizer steps,
evaluation off. Figures from the run's own events: the frozen base's weights (the census rows that are not the
adapter: nf4 / int8 rows with their quantization constants, the 16-bit rest), all weights (the memory event's),
and seconds per step after the warm-up: the process's CPU time (the step's own cost, with one torch thread, whatever
else the machine runs) and the wall time between step events (the machine's share). On a CPU the quantized layers dequantize in
bitsandbytes' CPU kernels and compute in the recipe's dtype: the step-time ratio is this machine's, not a GPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from . import run_child

KINDS = ("none", "nf4", "int8")


def _cpu_clock():
    """An engine observer noting this process's CPU time after each optimizer step (one torch thread: the step's own
    cost, whatever else the machine runs; wall time is the machine's share)."""
    from ..engine.observers import Observer

    class CpuClock(Observer):
        def __init__(self):
            self.marks: list = []

        def after_step(self, run, step, outcome, loss):
            self.marks.append(time.process_time())

    return CpuClock()


def run_one(args) -> dict:
    """One contender (``--only KIND``): its run's figures."""
    from ..config.recipes import load_recipe
    from ..diagnosis import observers_for
    from ..engine import run_engine
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    with tempfile.TemporaryDirectory() as tmp:
        recipe, steps = load_recipe(args.recipe), args.warmup + args.steps
        warmup = min(recipe.run_config(args.set, checks=False).schedule.resolved_warmup_steps, steps)  # a short run
        overrides = [
            *args.set,
            f"quantization.base={args.only}",
            f"schedule.max_steps={steps}",
            f"schedule.warmup_steps={warmup}",
            "schedule.eval_loss_every=0",
            "data.eval=null",
            f"output.runs_dir={tmp}",
            "output.progress_bar=false",
            f"output.run_name={args.only}",
        ]
        cfg = recipe.run_config(overrides)
        clock = _cpu_clock()
        result = run_engine(cfg, None, observers=observers_for(cfg) + [clock])  # workbench.train's, and the clock
        events = list(iter_events(result.run_dir / EVENTS_FILE))
    of = {}
    for e in events:
        of.setdefault(getattr(e, "type", ""), []).append(e)
    census = of["census"][0]
    steps = of["step"]
    times = [b.time - a.time for a, b in zip(steps[args.warmup - 1 :], steps[args.warmup :])]
    started = of["run_started"][0]
    return {
        "base_weights": sum(r["bytes"] for r in census.rows if r["group"] != "lora"),
        "all_weights": of["memory"][-1].params_bytes,
        "s_per_step": statistics.median(times),
        "precision": started.precision["mode"],
        "model": cfg.model.source,
        "tokens_per_step": statistics.median(s.tokens for s in steps[args.warmup :]),
        "cpu_s_per_step": statistics.median(
            b - a for a, b in zip(clock.marks[args.warmup - 1 :], clock.marks[args.warmup :])
        ),
        "quantized_layers": of["base_quantized"][0].layers if "base_quantized" in of else 0,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.bench.qlora", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="identity-demo", help="the recipe whose run is timed (default: identity-demo)")
    p.add_argument("--steps", type=int, default=8, help="timed optimizer steps (default 8)")
    p.add_argument("--warmup", type=int, default=2, help="steps before the timing starts (default 2)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change the recipe (repeatable)")
    p.add_argument("--only", choices=KINDS, help=argparse.SUPPRESS)  # child-process mode
    args = p.parse_args(argv)
    if args.warmup < 1 or args.steps < 1:
        p.error("--warmup and --steps must be at least 1")
    if args.only:
        print("RESULT " + json.dumps(run_one(args)), flush=True)
        return 0
    passthrough = list(argv if argv is not None else sys.argv[1:])
    results = {}
    for kind in KINDS:
        got = run_child("workbench.bench.qlora", passthrough, kind)
        if got is None:
            return 1
        results[kind] = got
    ref = results["none"]
    print(
        f"recipe {args.recipe} ({ref['model']}, {ref['precision']}, {ref['tokens_per_step']:,.0f} tokens a step), "
        f"{args.steps} timed steps after {args.warmup}, one run each"
    )
    print(
        f"{'base':<6}{'layers':>8}{'base weights MB':>17}{'x bf16':>8}{'all weights MB':>16}"
        f"{'CPU s/step':>12}{'x bf16':>8}{'wall s/step':>13}"
    )
    for kind, r in results.items():
        label = "bf16" if kind == "none" else kind
        print(
            f"{label:<6}{r['quantized_layers']:>8}{r['base_weights'] / 1e6:>17.1f}"
            f"{r['base_weights'] / ref['base_weights']:>8.3f}{r['all_weights'] / 1e6:>16.1f}"
            f"{r['cpu_s_per_step']:>12.3f}{r['cpu_s_per_step'] / ref['cpu_s_per_step']:>8.2f}{r['s_per_step']:>13.3f}"
        )
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: CPU s/step is the step's own cost (with "
        "OMP_NUM_THREADS=1), wall s/step the machine's share of it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
