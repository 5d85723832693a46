"""Measure the monitor's responsiveness inside a real Jupyter kernel while a run is going.

    python -m workbench.bench.monitor [--model tiny-glm4] [--steps 150] [--pings 60]

* event -> chart latency: for every step event, the time from its ``time`` stamp (written by the
  worker) to the redraw that put it into the loss FigureWidget's data (the comm message to the
  browser leaves in that same call). Target p95 < 1 s.
* kernel round trip: ``execute_request("pass")`` -> ``execute_reply`` through jupyter_client, sent
  every 0.1 s while the run is going and the monitor polls. Target < 200 ms.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

SETUP = """
import json
from workbench.config import load_config
from workbench.demo import SAMPLES
from workbench.ui.monitor_panel import RunMonitor
cfg = load_config(None, {{"model.source": {model!r}, "precision.mode": "fp32", "schedule.max_steps": {steps},
                         "schedule.micro_batch_size": 2, "data.max_length": 64, "schedule.eval_loss_every": 0,
                         "data.train": str(SAMPLES / "identity" / "train.jsonl"), "data.eval": None,
                         "output.runs_dir": {runs!r}, "output.memory_every": 5}})
monitor = RunMonitor(lambda: cfg)
monitor.launch_button.click()
"""


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _execute(kc, code: str, timeout: float = 600.0) -> tuple[float, str]:
    """Run ``code``; returns (round-trip seconds, stdout)."""
    t0 = time.perf_counter()
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    rtt = time.perf_counter() - t0
    out = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=0.05)
        except queue.Empty:  # the kernel has said all it had to say
            break
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))
    if reply["content"].get("status") != "ok":
        raise RuntimeError(f"{code!r} failed: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
    return rtt, "".join(out)


def measure(model: str = "tiny-glm4", steps: int = 150, pings: int = 60) -> dict:
    from jupyter_client.manager import start_new_kernel

    work = Path(tempfile.mkdtemp(prefix="wb-ui-bench-"))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(work))
    try:
        _execute(kc, SETUP.format(model=model, steps=steps, runs=str(work / "runs")))
        # wait (without blocking the kernel) until steps are being drawn
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            _, out = _execute(kc, "print(len(monitor.state.loss.x), monitor.state.status)")
            n, status = out.split()
            if int(n) >= 2 or status in ("finished", "failed", "stopped"):
                break
            time.sleep(0.5)
        rtts = []
        for _ in range(pings):
            _, out = _execute(kc, "print(monitor.state.status)")
            if out.strip() != "running":
                break
            rtt, _ = _execute(kc, "pass")
            rtts.append(rtt)
            time.sleep(0.1)
        _execute(kc, "state = await monitor.wait(timeout=1200)")
        _, out = _execute(
            kc,
            "print(json.dumps({'latencies': monitor.poller.latencies, 'redraws': monitor.poller.redraws, "
            "'steps': monitor.state.step, 'status': monitor.state.status}))",
        )
        result = json.loads(out)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    lat = result["latencies"]
    summary = {
        "model": model,
        "steps": result["steps"],
        "status": result["status"],
        "redraws": result["redraws"],
        "latency_samples": len(lat),
        "rtt_samples": len(rtts),
    }
    if lat:
        summary.update(
            latency_p50_ms=1000 * statistics.median(lat),
            latency_p95_ms=1000 * _percentile(lat, 0.95),
            latency_max_ms=1000 * max(lat),
        )
    if rtts:
        summary.update(
            rtt_p50_ms=1000 * statistics.median(rtts),
            rtt_p95_ms=1000 * _percentile(rtts, 0.95),
            rtt_max_ms=1000 * max(rtts),
        )
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.bench.monitor", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny-glm4")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--pings", type=int, default=60, help="kernel round trips measured while the run goes")
    args = p.parse_args(argv)
    s = measure(args.model, args.steps, args.pings)
    print(json.dumps(s, indent=2))
    ok = s.get("latency_p95_ms", 1e9) < 1000 and s.get("rtt_p95_ms", 1e9) < 200
    print(
        f"event->chart p95 {s.get('latency_p95_ms', float('nan')):.0f} ms (target < 1000); kernel round trip p95 "
        f"{s.get('rtt_p95_ms', float('nan')):.0f} ms (target < 200): {'OK' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
