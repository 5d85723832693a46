"""Runs' logs as the tests need them: ``step_event``, the one builder of a Step event that the tests which write a
log by hand use (a change to Step's fields is made here); ``write_method_run``, run_started for a method, then a
step event per step and the method's own events beside each (GRPO's rollout and mismatch, DPO's rewards)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from workbench.events import EventWriter, RunStarted, Step


def step_event(n: int, loss: float = 0.1, **fields) -> Step:
    """Step ``n`` of a run: ``loss``, lr 1e-3, grad norm 1, no loss scale, not skipped, 10 tokens at 1 token/s, a
    second a step and a second left; ``fields`` set any of them otherwise (``skipped``, ``eta_s``, ``rank``, ...)."""
    return Step(
        **{
            "step": n,
            "loss": loss,
            "lr": 1e-3,
            "grad_norm": 1.0,
            "loss_scale": None,
            "skipped": False,
            "tokens": 10,
            "tokens_per_s": 1.0,
            "step_time_s": 1.0,
            "eta_s": 1.0,
            **fields,
        }
    )


def write_method_run(
    run_dir: Path, method: str, step_events: Callable[[int], Iterable] = lambda n: (), steps=(1, 2), loss=0.1
) -> None:
    """``run_dir/events.jsonl`` of a bf16 tiny-glm4 run of ``training.method`` ``method``: steps ``steps`` of loss
    ``loss``, each followed by ``step_events(n)``."""
    run_dir.mkdir(parents=True)
    config = {"model": {"source": "tiny-glm4"}, "data": {}, "training": {"method": method}}
    with EventWriter(run_dir / "events.jsonl") as w:
        w.emit(
            RunStarted(
                run_dir=str(run_dir),
                config=config,
                hardware={},
                versions={},
                precision={"mode": "bf16"},
                total_steps=len(steps),
            )
        )
        for n in steps:
            w.emit(step_event(n, loss=loss))
            for event in step_events(n):
                w.emit(event)
