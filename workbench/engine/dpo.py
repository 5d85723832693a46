"""The DPO step of the engine (``training.method: dpo``): direct preference optimisation on data.train's preference
pairs (``data.TokenizedPair``: a prompt with its chosen and its rejected reply, each tokenized as an SFT row is).

The reference is the model as the run starts, frozen: before the first step every pair's chosen and rejected
log-probabilities are computed once (no gradient, eval mode, the run's autocast; with a fresh LoRA adapter that is
the base model, with a full fine-tune the weights as loaded) and kept. They travel in the checkpoint's
``resume_state``, so an exact resume compares with the start's figures, never recomputed from trained weights. Under
DDP each rank computes its share of the pairs and the figures are summed over ranks (every rank then holds all).

Per optimizer step, each of ``grad_accum_steps`` micro-batches takes ``micro_batch_size`` pairs (this rank's slice
of the data stream, as SFT takes rows) and runs one forward over their 2 x micro_batch_size sequences (the chosen
rows, then the rejected ones, as TRL concatenates them); each reply's log-probability is summed over its assistant
tokens (``forward.sequence_logprobs``, through the run's ``memory.loss_head``: with the default chunked head no
[2 x micro_batch_size, seq, vocab] logits are ever held), the loss is ``engine.dpo_loss`` (dpo.loss_type, dpo.beta), and the window's
loss is the mean over its pairs on all ranks (TRL's mean: the divisor is the window's pairs, as SFT's is its tokens).
The step's ``DpoRewards`` event says what the implicit rewards did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import torch

from ..config import ConfigError, RunConfig
from ..data import TokenizedPair, collate
from ..events.schema import DpoRewards
from ..forward import on_device, sequence_logprobs
from ..precision import count_target_tokens, window_loss_divisor
from .dpo_loss import RewardSums, dpo_losses, reward_sums
from .step import Accumulated, Trainee


class DpoStep:
    """DPO's part of an optimizer step (``TrainingStep``): the backward of every micro-batch of pairs against the
    frozen reference; the engine then takes the optimizer step as for SFT."""

    reads_pairs: ClassVar[bool] = True  # data.train is loaded as preference pairs

    def __init__(self, cfg: RunConfig, trainee: Trainee, pairs: Sequence[TokenizedPair]):
        self.cfg, self.t, self.pairs = cfg, trainee, pairs
        self.reference: torch.Tensor | None = None  # [pairs, 2] float64: (chosen, rejected) of the start model
        self._saved: list | None = None  # the reference as resume_state writes it (built once)

    @classmethod
    def for_run(cls, cfg: RunConfig, trainee: Trainee, examples: Sequence, scorer: Any = None) -> DpoStep:
        if not examples or not all(isinstance(e, TokenizedPair) for e in examples):
            raise ConfigError(
                [
                    (
                        "data.train",
                        "dpo trains on preference pairs (prompt, chosen, rejected), and the "
                        "training examples are not pairs",
                    )
                ]
            )
        return cls(cfg, trainee, examples)

    @property
    def rows(self) -> int:
        return len(self.pairs)

    def resume_state(self) -> dict:
        """The reference log-probabilities (the start model's), so that a resume does not recompute them from
        trained weights."""
        if self.reference is None:
            return {}
        if self._saved is None:
            self._saved = self.reference.tolist()
        return {"reference_logprobs": self._saved}

    def restore(self, state: dict) -> None:
        saved = state.get("reference_logprobs")
        if saved is None:
            return
        if len(saved) != len(self.pairs):
            raise ConfigError(
                [
                    (
                        "data.train",
                        f"the checkpoint's reference holds {len(saved)} pairs and data.train "
                        f"{len(self.pairs)}: resume with the pairs the run started with",
                    )
                ]
            )
        self.reference, self._saved = torch.tensor(saved, dtype=torch.float64), saved

    def _batch(self, indices: Sequence[int]) -> dict:
        """The pairs ``indices`` as one batch: their chosen sequences, then their rejected ones."""
        pairs = [self.pairs[i] for i in indices]
        return collate([p.chosen for p in pairs] + [p.rejected for p in pairs], self.t.tokenizer.pad_token_id)

    @torch.no_grad()
    def reference_logprobs(self) -> torch.Tensor:
        """[pairs, 2]: each pair's chosen and rejected log-probability under the model as it is now (the run's start),
        in eval mode under the run's autocast. Rank r computes pairs r, r + world_size, ...; every rank runs as many
        forwards (a rank out of pairs repeats one and discards it: a wrapper's forward may be collective)."""
        t, mbs = self.t, self.cfg.schedule.micro_batch_size
        n, world, rank = len(self.pairs), t.world.world_size, t.world.rank
        mine = list(range(rank, n, world))
        values = [0.0] * (2 * n)
        was_training = t.forward.training
        t.forward.eval()
        try:
            for start in range(0, -(-n // world), mbs):
                chunk = mine[start : start + mbs]
                logp, _ = sequence_logprobs(
                    t.forward, on_device(self._batch(chunk or [0]), t.device), t.precision.autocast, self.cfg.memory
                )
                chosen, rejected = logp.double().cpu().chunk(2)
                for k, i in enumerate(chunk):
                    values[2 * i], values[2 * i + 1] = float(chosen[k]), float(rejected[k])
        finally:
            t.forward.train(was_training)
        return torch.tensor(t.world.sum(values), dtype=torch.float64).view(n, 2)

    def accumulate(self, stream: Iterator[Sequence[int]], step: int) -> Accumulated:
        """The backward of ``grad_accum_steps`` micro-batches of pairs: this rank's summed pair loss, divided by the
        window's pairs over all ranks; the target tokens of both sides over all ranks; the step's DpoRewards."""
        t, dpo = self.t, self.cfg.dpo
        if self.reference is None:  # before the first step: the start model, frozen from here on
            self.reference = self.reference_logprobs()
        mbs, rank = self.cfg.schedule.micro_batch_size, t.world.rank
        windows = []
        local_pairs = local_tokens = processed = 0
        for _ in range(self.cfg.schedule.grad_accum_steps):
            idx = next(stream)[rank * mbs : (rank + 1) * mbs]  # this rank's slice of the global micro-batch
            batch = self._batch(idx)
            local_pairs += len(idx)
            local_tokens += count_target_tokens(batch["labels"])
            processed += int(batch["attention_mask"].sum())
            windows.append((idx, on_device(batch, t.device)))
        window_pairs, window_tokens = (int(v) for v in t.world.sum([local_pairs, local_tokens]))
        divisor = window_loss_divisor(window_pairs, t.world.world_size)
        parts, rewards = [], []
        for i, (idx, batch) in enumerate(windows):
            ref = self.reference[idx]
            with t.accumulating(i == len(windows) - 1):
                logp, tokens = sequence_logprobs(t.forward, batch, t.precision.autocast, self.cfg.memory)
                (pi_c, pi_r), (n_c, n_r) = logp.chunk(2), tokens.chunk(2)
                ref_c, ref_r = ref[:, 0].to(logp.device), ref[:, 1].to(logp.device)
                part = dpo_losses(pi_c, pi_r, ref_c, ref_r, dpo.beta, dpo.loss_type, n_c, n_r).sum()
                t.backward(part / divisor)
            parts.append(part.detach())
            rewards.append(reward_sums(pi_c, pi_r, ref_c, ref_r, dpo.beta))
        loss_sum = float(torch.stack(parts).double().sum())
        total = RewardSums.total(t.world.sum([sum(column) for column in zip(*(r.as_list() for r in rewards))]))
        return Accumulated(loss_sum, window_pairs, window_tokens, processed, (self._event(total),))

    def _event(self, r: RewardSums) -> DpoRewards:
        n = max(r.pairs, 1.0)
        return DpoRewards(
            step=0,
            pairs=int(r.pairs),
            beta=self.cfg.dpo.beta,
            loss_type=self.cfg.dpo.loss_type,
            reward_chosen=r.chosen / n,
            reward_rejected=r.rejected / n,
            margin=r.margin / n,
            accuracy=r.right / n,
            logp_chosen=r.logp_chosen / n,
            logp_rejected=r.logp_rejected / n,
        )
