"""One optimizer step of a run: what a training method implements, what a step returns, the optimizer.

The whole step reads from one entry point, ``_Engine.train_step`` (``engine/run.py``), as nanoGPT's ``train.py``
reads. In order:

1. The window: the method's ``TrainingStep.accumulate`` runs every micro-batch's forward and backward, each summed
   token loss divided by what the window's loss is normalised by (``precision/step.py``: ``window_loss_divisor``),
   so that the accumulated gradient is the gradient of the window's mean loss.

   * SFT: ``engine/sft.py`` ``SftStep``: rows collated (``data``), the loss of a batch (``forward/loss.py``:
     ``batch_loss_sum``), the strategy's ``accumulating`` / ``backward`` (``distributed/strategies.py``).
   * GRPO: ``engine/grpo.py`` ``GrpoStep``: completions sampled (``forward/generate.py``), scored by the run's
     ``RolloutScorer`` (``rewards``), the clipped surrogate (``engine/grpo_loss.py``).
   * DPO: ``engine/dpo.py`` ``DpoStep``: preference pairs' chosen and rejected replies (``forward/loss.py``:
     ``sequence_logprobs``) against the frozen start model's, the DPO or IPO loss (``engine/dpo_loss.py``).

2. The observers' ``before_optimizer_step`` (``engine/observers.py``): gradients still allocated (still scaled).
3. The optimizer step: ``Strategy.step`` (``distributed/strategies.py``) -> ``precision/step.py``
   ``optimizer_step``: unscale -> clip -> step -> update, a non-finite gradient skipping the step and naming its
   parameters (DeepSpeed steps itself; its verdict is read back into the same ``StepOutcome``). The optimizer is
   ``build_optimizer``'s.
4. The learning-rate schedule (``engine/schedule.py``), and the window's loss over all ranks: a ``StepResult``.

``_Engine.advance`` then records the step (its events, checkpoints, observers' ``after_step``).

A new training method (``training.method``) is one class with the ``TrainingStep`` interface, registered in
``engine/run.py``'s ``STEP_TYPES``: the engine runs it with no branch of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch

from ..config import RunConfig
from ..config.optimizer import optimizer_settings
from ..distributed.context import DistContext
from ..events.schema import Event
from ..precision import PrecisionPolicy, StepOutcome


@dataclass(frozen=True)
class Trainee:
    """What a step type may use of the run it trains, and nothing more (the engine builds it once the model and the
    strategy exist): the unwrapped model (sampling, the adapter's disable and save), what the trainer's forward runs
    through (the strategy's wrapper), the tokenizer and processor (None for a text model), the run's precision
    policy (its autocast and mode), the device, the world (``rank``, ``world_size``, ``sum``: the collectives every
    rank calls alike) and the strategy's accumulation context and backward."""

    module: torch.nn.Module
    forward: torch.nn.Module
    tokenizer: Any
    processor: Any
    precision: PrecisionPolicy
    device: torch.device
    world: DistContext
    accumulating: Callable[[bool], AbstractContextManager]
    backward: Callable[[torch.Tensor], None]


@dataclass(frozen=True)
class Accumulated:
    """A step type's window, its backward done.

    Attributes:
        loss_sum: this rank's summed loss over the window.
        divisor: what the window's loss sum over all ranks is divided by (its target tokens for SFT; for GRPO what
            ``rl.loss_type`` normalises by; its pairs for DPO).
        target_tokens: the window's trained tokens, over all ranks.
        processed_tokens: the tokens this rank ran forward (prompts and completions, padding not counted).
        events: the step's own events (GRPO's rollout and policy mismatch, DPO's rewards), written by rank 0 with the
            step's number.
    """

    loss_sum: float
    divisor: float
    target_tokens: int
    processed_tokens: int
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class StepResult:
    """One optimizer step taken (``_Engine.train_step``), and what the run made of it (``_Engine.advance``).

    Attributes:
        loss: the window's mean loss over all ranks.
        target_tokens: the window's trained tokens, over all ranks.
        processed_tokens: the tokens every rank ran forward, summed.
        outcome: the optimizer step's ``StepOutcome`` (gradient norm, skipped, loss scale).
        model_state: the model-state bytes with gradients still allocated, when measured (``output.memory_every``).
        events: the step type's own events (``Accumulated.events``).
        stop_reasons: why this rank's observers asked the run to stop (``advance`` fills them).
    """

    loss: float
    target_tokens: int
    processed_tokens: int
    outcome: StepOutcome
    model_state: dict | None = None
    events: tuple[Event, ...] = ()
    stop_reasons: tuple[str, ...] = ()


class TrainingStep(Protocol):
    """A training method's part of an optimizer step: the forward and backward of one window. The engine takes the
    optimizer step, records it and saves the state; a step type sees the run only through its ``Trainee``."""

    rows: int  # what the data stream's indices index: training rows (SFT), prompts (GRPO), pairs (DPO)
    reads_pairs: ClassVar[bool]  # data.train is loaded as preference pairs (``data.TokenizedPair``), not rows

    @classmethod
    def for_run(cls, cfg: RunConfig, trainee: Trainee, examples: Sequence, scorer: Any) -> TrainingStep:
        """The step of a run: its config, its trainee, its tokenized training rows and the rollout scorer it was
        given (``engine.grpo.RolloutScorer``, None unless ``training.method`` scores rollouts); ConfigError naming
        the field for a run this method cannot train."""

    def accumulate(self, stream: Iterator[Sequence[int]], step: int) -> Accumulated:
        """The forward and backward of optimizer step ``step`` (1-based) over the micro-batches it takes from
        ``stream`` (global micro-batches of row indices; each rank takes its slice)."""

    def resume_state(self) -> dict:
        """What an exact resume needs beyond weights, optimizer and the stream's position (JSON)."""

    def restore(self, state: dict) -> None:
        """Continue from ``resume_state``'s dict of a checkpoint."""


def build_optimizer(params: list, schedule) -> torch.optim.Optimizer:
    """The optimizer of a run's trainable ``params``: torch AdamW on ``config.optimizer.optimizer_settings``
    (what the DeepSpeed config of the run writes too), with foreach kernels."""
    return torch.optim.AdamW(params, **optimizer_settings(schedule), foreach=True)
