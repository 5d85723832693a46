"""The cost of watching a long run: does following a run get slower as the run gets longer?

    python -m workbench.bench.long_run [--sizes 1000 10000 100000 1000000] [--dir DIR]

For each size, writes a synthetic event log of that many steps through the real ``EventWriter`` (one step event a
step, a memory event every 10, an fp16 overflow with its skipped step every 997 steps, a diagnosis every 50,000), of
a run that is still going (a live ``foreground.pid``, no final event), and prints:

* row:      one update of the run's row as the side panel's stream and ``workbench runs`` make it, after one more
            step was logged (``workbench.runs.run_row``)
* runs:     ``workbench runs`` on a runs directory holding that run (the command, output discarded)
* attach:   ``RunMonitor.attach`` (reads the log, draws every chart once)
* update:   one incremental monitor update after one more step was logged (read it, fold it, redraw)
* points:   the most points any chart trace of the monitor holds (what goes to the browser per chart)
* zoom:     zooming the loss chart into ZOOM_STEPS steps from a quarter of the run: that window read again from the
            log, every step of it (``MonitorCharts.zoom_chart``, what a plotly zoom calls)

Writing the 1M-step log takes a minute or more here; ``--sizes`` picks sizes. Times are wall seconds of one
measurement on whatever machine runs it (compare the rows of one run, not machines). ``--limit-s`` skips the
remaining measurements of a size once one has taken longer than that.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..events import EventWriter, Memory, Overflow, RunStarted, Step
from ..events.schema import Diagnosis
from ..runs.layout import EVENTS_FILE, FOREGROUND_PID

MEMORY_EVERY = 10
OVERFLOW_EVERY = 997
DIAGNOSIS_EVERY = 50_000
ZOOM_STEPS = 1000  # the zoomed window: this many steps from a quarter of the run, shown at full resolution


def _step(i: int, scale: float, skipped: bool) -> Step:
    # a loss that falls and wobbles: decimation must keep its shape, not a flat line
    loss = 2.0 + 3.0 * math.exp(-i / 20_000) + 0.3 * math.sin(i / 37.0)
    return Step(
        step=i,
        loss=float("nan") if skipped else loss,
        lr=1e-4 * min(1.0, i / 100),
        grad_norm=float("inf") if skipped else 1.0 + (i % 13) / 10,
        loss_scale=scale,
        skipped=skipped,
        tokens=512,
        tokens_per_s=2048.0,
        step_time_s=0.25,
        eta_s=100.0,
    )


def write_log(run_dir: Path, steps: int, start: int = 1, total_steps: int | None = None) -> None:
    """Append ``steps`` steps (from step ``start``) of a synthetic fp16 run to ``run_dir``'s log; the run_started
    event first when ``start`` is 1."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with EventWriter(run_dir / EVENTS_FILE) as w:
        if start == 1:
            w.emit(
                RunStarted(
                    run_dir=str(run_dir),
                    config={"model": {"source": "tiny-glm4"}, "precision": {"mode": "fp16"}},
                    hardware={"device": "cpu"},
                    versions={},
                    total_steps=total_steps or steps,
                    precision={"mode": "fp16", "use_grad_scaler": True},
                )
            )
        scale = 65536.0
        for i in range(start, start + steps):
            skipped = i % OVERFLOW_EVERY == 0
            if skipped:
                w.emit(
                    Overflow(
                        step=i,
                        scale_before=scale,
                        scale_after=scale / 2,
                        nonfinite_params=["layers.0.mlp.up"],
                        nonfinite_count=1,
                    )
                )
                scale /= 2
            elif i % 200 == 0:
                scale = min(scale * 2, 65536.0)
            w.emit(_step(i, scale, skipped))
            if i % MEMORY_EVERY == 0:
                w.emit(
                    Memory(
                        step=i,
                        devices=[],
                        host_rss=2**30 + (i % 1000) * 4096,
                        params_bytes=2**28,
                        grads_bytes=2**26,
                        optimizer_bytes=2**27,
                    )
                )
            if i % DIAGNOSIS_EVERY == 0:
                w.emit(
                    Diagnosis(
                        step=i,
                        kind="scale_collapse",
                        cause="loss scale fell",
                        fix="precision.mode=bf16",
                        module="layers.0.mlp.up",
                    )
                )


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def measure(runs_dir: Path, steps: int, limit_s: float = math.inf) -> dict:
    """The figures of one size (see the module doc); a figure not measured (over ``limit_s`` before it) is None."""
    from ..cli.main import main as cli_main
    from ..runs import run_row
    from ..ui.monitor_panel import RunMonitor

    run_dir = runs_dir / f"long-{steps}"
    t0 = time.perf_counter()
    write_log(run_dir, steps, total_steps=steps * 2)
    (run_dir / FOREGROUND_PID).write_text(str(os.getpid()))  # alive: the run is "running"
    out = {
        "steps": steps,
        "mb": (run_dir / EVENTS_FILE).stat().st_size / 2**20,
        "write_s": time.perf_counter() - t0,
        "row_s": None,
        "runs_s": None,
        "attach_s": None,
        "update_s": None,
        "points": None,
        "zoom_s": None,
    }
    run_row(run_dir)  # a follower that saw the run before the new step (as a stream has)
    write_log(run_dir, 1, start=steps + 1)
    out["row_s"], row = _timed(lambda: run_row(run_dir))
    assert row.step == steps + 1 and row.status == "running", row
    if out["row_s"] > limit_s:
        return out
    with contextlib.redirect_stdout(io.StringIO()):
        out["runs_s"], _ = _timed(lambda: cli_main(["runs", "--runs-dir", str(runs_dir)]))
    if out["runs_s"] > limit_s:
        return out
    monitor = RunMonitor()
    out["attach_s"], _ = _timed(lambda: monitor.attach(run_dir))
    if out["attach_s"] > limit_s:
        return out
    write_log(run_dir, 1, start=steps + 2)
    out["update_s"], _ = _timed(lambda: monitor.poll_once(force=True))
    assert monitor.state.step == steps + 2, monitor.state.step
    out["points"] = max(
        len(trace.x or ())
        for fig in monitor.charts.figures.values()
        for trace in fig.data
        if getattr(trace, "x", None) is not None
    )
    first = steps // 4
    last = first + min(ZOOM_STEPS, steps // 2)
    out["zoom_s"], _ = _timed(lambda: monitor.charts.zoom_chart("loss", (first, last)))
    assert list(monitor.charts.loss_fig.data[0].x) == list(range(first, last + 1)), "a zoomed window shows every step"
    return out


def _fmt(v, unit="s") -> str:
    return "n/m" if v is None else f"{v:.3f} {unit}" if unit == "s" else f"{v:,}"


def report(rows: list[dict]) -> str:
    head = (
        "| steps | log | row update | `workbench runs` | monitor attach | monitor update | points per chart | "
        f"zoom to {ZOOM_STEPS:,} steps |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['steps']:,} | {r['mb']:.1f} MB | {_fmt(r['row_s'])} | {_fmt(r['runs_s'])} | "
            f"{_fmt(r['attach_s'])} | {_fmt(r['update_s'])} | {_fmt(r['points'], '')} | {_fmt(r.get('zoom_s'))} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1_000, 10_000, 100_000, 1_000_000],
        help="run lengths in steps (the 1M log takes a minute or more to write)",
    )
    p.add_argument("--dir", help="where to write the logs (default: a temporary folder, removed after)")
    p.add_argument(
        "--limit-s",
        type=float,
        default=math.inf,
        help="skip a size's remaining measurements once one took longer than this",
    )
    args = p.parse_args(argv)
    if any(s < 1 for s in args.sizes):
        p.error("--sizes: every size must be at least 1 step")
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="wb-long-run-"))
    rows = []
    try:
        for steps in args.sizes:
            runs_dir = root / f"size-{steps}"  # one run per runs directory: `workbench runs` times that run alone
            shutil.rmtree(runs_dir, ignore_errors=True)
            print(f"{steps:,} steps: writing and measuring ...", file=sys.stderr, flush=True)
            rows.append(measure(runs_dir, steps, args.limit_s))
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
            shutil.rmtree(runs_dir, ignore_errors=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
