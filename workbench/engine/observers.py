"""Observers: optional instruments the engine calls at fixed points of a step (the precision
diagnosis, coverage sampling, ...). Keeping them out of the loop body keeps the step readable and
their cost opt-in.

An observer sees a run through ``RunView``: a few documented, read-only handles, never the engine
itself. Observers are composed by whoever starts a run (``workbench.train``, the worker), not by the
engine, so the engine imports no instrument.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..config import RunConfig
from ..precision import PrecisionPolicy, StepOutcome


@dataclass(frozen=True)
class RunView:
    """What an observer may see of a run."""

    cfg: RunConfig
    model: torch.nn.Module  # what forward runs on (the strategy's wrapper, if any)
    named_trainable: Sequence[tuple[str, torch.nn.Parameter]]  # trained weights, in registration order
    precision: PrecisionPolicy
    rank: int
    world_size: int
    start_step: int  # optimizer steps completed before this process started (a resume)
    train_examples: Sequence  # the tokenized training rows (their labels, for a replay)
    emit: Callable  # emit(event): write an event to the run's log, tagged with this rank
    zero_grad: Callable[[], None]  # drop the trained weights' gradients (after a replay)
    tokenizer: Any = None  # the run's tokenizer (task metrics render prompts and decode answers with it)
    processor: Any = None  # a vision-language model's processor (rows with screenshots), else None


class Observer:
    def setup(self, run: RunView) -> None:
        """After the model, optimizer and scaler exist (and after a resume)."""

    def before_optimizer_step(self, run: RunView, step: int) -> None:
        """After backward of the last micro-batch, gradients still allocated (still scaled under fp16)."""

    def after_step(self, run: RunView, step: int, outcome: StepOutcome, loss: float) -> str | None:
        """After the optimizer step. Return a reason string to stop the run cleanly (checkpoint first)."""
        return None

    def finish(self, run: RunView) -> None:
        """Once, before run_finished."""
