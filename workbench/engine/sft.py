"""The SFT step of the engine (``training.method: sft``): supervised fine-tuning's window of ``grad_accum_steps``
micro-batches of tokenized rows, each forward's summed token loss divided by the window's target tokens over all
ranks, then backward (``engine/step.py`` says where the rest of the optimizer step lives)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import torch

from ..config import RunConfig
from ..data import collate
from ..forward import batch_loss_sum, on_device
from ..precision import count_target_tokens, window_loss_divisor
from .step import Accumulated, Trainee


class SftStep:
    """SFT's part of an optimizer step (``TrainingStep``): the backward of every micro-batch of training rows."""

    reads_pairs: ClassVar[bool] = False  # data.train is loaded as rows (preference pairs: DPO)

    def __init__(self, cfg: RunConfig, trainee: Trainee, examples: Sequence):
        self.cfg, self.t, self.examples = cfg, trainee, examples

    @classmethod
    def for_run(cls, cfg: RunConfig, trainee: Trainee, examples: Sequence, scorer: Any = None) -> SftStep:
        return cls(cfg, trainee, examples)

    @property
    def rows(self) -> int:
        return len(self.examples)

    def resume_state(self) -> dict:
        return {}  # the stream's position and the weights are all an SFT step continues from

    def restore(self, state: dict) -> None:
        pass

    def forward_loss_sum(self, batch: dict) -> torch.Tensor:
        """The summed token loss of one micro-batch, through the strategy's wrapper under the run's autocast."""
        return batch_loss_sum(self.t.forward, batch, self.t.precision.autocast, self.cfg.memory)

    def accumulate(self, stream: Iterator[Sequence[int]], step: int) -> Accumulated:
        """The backward of ``grad_accum_steps`` micro-batches, token-normalised over the window: this rank's loss sum,
        divided by the window's target tokens over all ranks."""
        t = self.t
        batches = []
        local_tokens = processed = 0
        mbs, rank = self.cfg.schedule.micro_batch_size, t.world.rank
        for _ in range(self.cfg.schedule.grad_accum_steps):
            idx = next(stream)[rank * mbs : (rank + 1) * mbs]  # this rank's slice of the global micro-batch
            batch = collate([self.examples[i] for i in idx], t.tokenizer.pad_token_id)
            # counted on the host copy: no device round trip per micro-batch
            local_tokens += count_target_tokens(batch["labels"])
            processed += int(batch["attention_mask"].sum())
            batches.append(on_device(batch, t.device))
        window_tokens = int(t.world.sum([local_tokens])[0])
        divisor = window_loss_divisor(window_tokens, t.world.world_size)
        parts = []
        for i, batch in enumerate(batches):
            with t.accumulating(i == len(batches) - 1):
                part = self.forward_loss_sum(batch)
                t.backward(part / divisor)
            parts.append(part.detach())
        loss_sum = float(torch.stack(parts).double().sum())  # one device sync for the window
        return Accumulated(loss_sum, window_tokens, window_tokens, processed)
