"""Observers: optional instruments the engine calls at fixed points of a step (diagnosis, coverage
sampling, ...). They see the engine; they write events through ``engine.writer``. Keeping them out
of the loop body keeps the step readable and their cost opt-in."""
from __future__ import annotations

from typing import Optional


class Observer:
    def setup(self, engine) -> None:
        """After the model, optimizer and scaler exist (and after a resume)."""

    def before_optimizer_step(self, engine, step: int) -> None:
        """After backward of the last micro-batch, gradients still allocated (still scaled under fp16)."""

    def after_step(self, engine, step: int, outcome, loss: float) -> Optional[str]:
        """After the optimizer step. Return a reason string to stop the run cleanly (checkpoint first)."""
        return None

    def finish(self, engine) -> None:
        """Once, before run_finished."""


def default_observers(cfg) -> list[Observer]:
    """The observers a run gets from its config."""
    from ..diagnosis import DiagnosisObserver, ModulePrecisionObserver  # imported late: diagnosis imports the engine

    observers: list[Observer] = [ModulePrecisionObserver(cfg)]
    diagnosis = getattr(cfg, "diagnosis", None)
    if diagnosis is not None and diagnosis.enabled:
        observers.append(DiagnosisObserver(cfg))
    return observers
