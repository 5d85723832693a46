"""Hand-written event logs: a short fp16 run (one overflow, a skipped step, GPU memory on two ranks, an eval)."""

from __future__ import annotations

from pathlib import Path

from workbench.events import Eval, EventWriter, Memory, Overflow, RunFinished, RunStarted, Step

MiB = 2**20


def step(n: int, **kw) -> Step:
    fields = dict(
        step=n,
        loss=2.0 / n + 0.123456789,
        lr=1e-3 * n,
        grad_norm=0.5 + n / 7,
        loss_scale=65536.0,
        skipped=False,
        tokens=64,
        tokens_per_s=100.0 + n,
        step_time_s=0.1,
        eta_s=1.0,
        time=1_700_000_000.0 + n,
    )
    fields.update(kw)
    return Step(**fields)


def memory(n: int, rank: int = 0) -> Memory:
    return Memory(
        step=n,
        devices=[{"device": "cuda:0", "allocated": 100 * MiB * n, "reserved": 200 * MiB, "peak": 150 * MiB * n}],
        host_rss=1000 * MiB + n,
        params_bytes=10 * MiB,
        grads_bytes=2 * MiB,
        optimizer_bytes=4 * MiB,
        rank=rank,
        time=1_700_000_000.5 + n,
    )


def started() -> RunStarted:
    return RunStarted(
        run_dir="x",
        config={"model": {"source": "tiny-glm4"}},
        hardware={},
        versions={},
        precision={"mode": "fp16"},
        total_steps=4,
    )


def write_run(run_dir: Path, events) -> Path:
    """Append ``events`` to RUN_DIR/events.jsonl, each through a writer of its rank (the writer stamps the rank)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    writers: dict[int, EventWriter] = {}
    for e in events:
        if e.rank not in writers:
            writers[e.rank] = EventWriter(run_dir / "events.jsonl", rank=e.rank)
        writers[e.rank].emit(e)
    for w in writers.values():
        w.close()
    return run_dir


def fp16_run_events() -> list:
    return [
        started(),
        step(1),
        memory(1),
        memory(1, rank=1),
        Overflow(step=2, scale_before=65536.0, scale_after=32768.0, nonfinite_params=["a"], nonfinite_count=1),
        step(2, grad_norm=float("inf"), skipped=True, loss_scale=32768.0),
        memory(2),
        step(3, loss_scale=32768.0),
        Eval(step=3, loss=1.25, tokens=10),
        step(4, loss_scale=32768.0),
        RunFinished(step=4, final_loss=0.6, adapter_path=None, wall_s=1.0),
    ]
