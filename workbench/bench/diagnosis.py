"""Overhead of the precision instruments on a steady run.

    python -m workbench.bench.diagnosis [--model smollm2-135m-instruct] [--mode fp32] [--blocks 6] [--steps 3]

One engine, one model; blocks of optimizer steps are interleaved round-robin over three conditions so
that drift (other processes on the cores, thermal) hits all of them alike:

* off:      no diagnosis observer, no hooks
* on:       the observer attached (batch-capture pre-hook, scale history, collapse check), coverage not sampled
* sampled:  as on, with coverage hooks armed for the step (what every ``coverage_every``-th step pays)

The per-step overhead at ``coverage_every = N`` is (on - off) + (sampled - on) / N, from medians of
the process's CPU time per step (time.process_time, one torch thread): on 2 shared cores, wall time
varies ~10x with what other processes do, CPU time much less.
The census (a pass over parameter metadata) and one overflow replay are timed directly; a steady run
has no overflows, so it pays for attribution only through the capture hook (part of "on").
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
import warnings

import torch

from ..config import load_config
from ..data import micro_batch_indices
from ..diagnosis import BatchCapture, DiagnosisObserver, observers_for
from ..diagnosis.overflow import replay_attribution
from ..engine.run import SteppedRun, engine_session
from ..events import iter_events
from ..runs.layout import EVENTS_FILE


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument(
        "--mode", default="fp32", help="fp32 by default: bf16 matmuls are ~28x slower than fp32 on AVX2-only CPUs"
    )
    p.add_argument("--seq", type=int, default=128, help="data.max_length")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--blocks", type=int, default=6, help="blocks per condition")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps per block")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--coverage-every", type=int, default=50)
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: CPU time is not inflated by spinning workers)"
    )
    args = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            figures = _run(args)
    finally:
        torch.set_num_threads(threads)  # main() called in a process that goes on (a test, a notebook)
    _report(args, *figures)
    return 0


def _run(args) -> tuple[dict, float, float, int]:
    with tempfile.TemporaryDirectory(prefix="wb-diag-bench-") as runs_dir:
        cfg = load_config(
            None,
            {
                "model.source": args.model,
                "precision.mode": args.mode,
                "data.max_length": args.seq,
                "data.eval": None,
                "schedule.micro_batch_size": args.batch,
                "schedule.max_steps": 10_000,
                "schedule.warmup_steps": 0,
                "output.runs_dir": runs_dir,
                "output.progress_bar": False,
                "output.memory_every": 10**9,
                "diagnosis.enabled": True,
                "diagnosis.coverage_every": args.coverage_every,
            },
        )
        # the run as workbench.train composes it (engine + the config's instruments), driven step by step
        with engine_session(cfg, observers=observers_for(cfg)) as run:
            return _measure(args, run)


def _measure(args, run: SteppedRun) -> tuple[dict, float, float, int]:
    """CPU seconds per step under each condition, of one census and of one overflow replay; coverage reports logged."""
    diag = next(o for o in run.observers if isinstance(o, DiagnosisObserver))
    others = [o for o in run.observers if o is not diag]
    if diag.coverage is not None:
        diag.coverage.disarm()  # setup armed step 1; the bench arms explicitly
    # The same micro-batch every step: a steady run whose step cost does not depend on which rows
    # (of which padded length) a condition happened to draw.
    stream = itertools.repeat(next(micro_batch_indices(run.train_rows, args.batch, 0)))

    def run_step(condition: str) -> float:
        if condition == "off":
            run.observers = others
        else:
            run.observers = others + [diag]
            if diag.capture is None:
                diag.capture = BatchCapture(run.model)
            if condition == "sampled":
                diag.coverage.arm()
        t0 = time.process_time()
        run.step(stream)  # the engine's own step: forward, backward, optimizer, events, observers
        dt = time.process_time() - t0
        if diag.coverage is not None and diag.coverage.armed:  # after_step may arm the next sample
            diag.coverage.disarm()
        if condition == "off" and diag.capture is not None:
            diag.capture.remove()
            diag.capture = None
        return dt

    for _ in range(args.warmup):
        run_step("on")
    times: dict = {"off": [], "on": [], "sampled": []}
    for _ in range(args.blocks):
        for condition in times:
            times[condition] += [run_step(condition) for _ in range(args.steps)]

    t0 = time.process_time()
    run.emit_census()
    census_s = time.process_time() - t0
    if diag.capture is None:
        diag.capture = BatchCapture(run.model)
    diag.capture.reset()
    run.observers = others  # the capture hook fills the window; the observer's after_step would clear it
    run.step(stream)
    window = diag.capture.window
    t0 = time.process_time()
    replay_attribution(run.view, diag.labels_for, window, 1.0)
    replay_s = time.process_time() - t0
    # what shows that the conditions differed as they should: one coverage report per sampled step
    coverage_reports = sum(
        1 for e in iter_events(run.run_dir / EVENTS_FILE, typed=False) if e.get("type") == "coverage"
    )
    return times, census_s, replay_s, coverage_reports


def _report(args, times: dict, census_s: float, replay_s: float, coverage_reports: int) -> None:
    med = {c: statistics.median(v) for c, v in times.items()}
    n = args.coverage_every
    per_step = (med["on"] - med["off"]) + (med["sampled"] - med["on"]) / n
    print(
        f"model {args.model}, {args.mode}, batch {args.batch} x {args.seq} tokens max, torch threads "
        f"{args.threads}; {args.blocks} blocks x {args.steps} steps per condition, interleaved"
    )
    for c, v in times.items():
        print(f"  {c:8s} median {med[c]:.4f} CPU-s/step  (min {min(v):.4f}, max {max(v):.4f}, n={len(v)})")
    print(
        f"  capture + history + collapse check (on - off): {med['on'] - med['off']:+.4f} s/step "
        f"({100 * (med['on'] - med['off']) / med['off']:+.2f}%)"
    )
    print(
        f"  coverage sampling on a sampled step (sampled - on): {med['sampled'] - med['on']:+.4f} s "
        f"({100 * (med['sampled'] - med['on']) / med['off']:+.2f}% of that step)"
    )
    print(f"  coverage reports in the run's log: {coverage_reports} (one per sampled step: {len(times['sampled'])})")
    print(f"  census (parameter_census + event): {census_s * 1000:.1f} ms, emitted at start/end (+ every census_every)")
    print(
        f"  one overflow replay (traced forward+backward of the window): {replay_s:.3f} s = "
        f"{replay_s / med['off']:.2f} steps; at most diagnosis.attribute_overflows per collapse_window, overflow steps only"
    )
    print(
        f"OVERHEAD at coverage_every={n}: {100 * per_step / med['off']:+.2f}% of step time "
        f"({per_step * 1000:+.2f} ms on {med['off']:.3f} s)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
