"""The numerically delicate part of a training step, in one place for every strategy.

* Loss normalisation: the summed token loss of each micro-batch is divided by the number of target
  tokens in the whole accumulation window (times the world size, because data-parallel wrappers
  average gradients over ranks). Accumulating per-micro-batch *means* instead would weight a short
  micro-batch like a long one.
* The optimizer step: unscale -> clip -> step -> update, with skipped (non-finite) steps detected
  and attributed to parameters before the gradients are cleared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..data.tokenize import IGNORE_INDEX


def count_target_tokens(labels: torch.Tensor) -> int:
    """Tokens that carry loss once labels are shifted left by one (the causal-LM convention)."""
    return int((labels[:, 1:] != IGNORE_INDEX).sum())


def target_loss_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of ``logits`` [..., vocab] against ``targets`` [...] (``IGNORE_INDEX`` skipped),
    computed in fp32 whatever the logits' dtype: the one cross-entropy of training, eval and every loss head."""
    return _fp32_cross_entropy(logits, targets, "sum")


def target_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``target_loss_sum``'s cross-entropy per position (0 where the target is ``IGNORE_INDEX``), fp32: what a sum per
    sequence is taken from (DPO's log-probability of a reply)."""
    return _fp32_cross_entropy(logits, targets, "none").reshape(targets.shape)


def _fp32_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str) -> torch.Tensor:
    logits = logits.float()
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.to(logits.device).reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    )


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy over target tokens: the logits at position t against the label at t+1."""
    return target_loss_sum(logits[:, :-1, :], labels[:, 1:])


def window_loss_divisor(window_tokens: int, world_size: int = 1) -> float:
    """What a micro-batch's summed loss is divided by so that the accumulated (and rank-averaged)
    gradient is the gradient of the mean token loss over the whole global batch.

    ``window_tokens`` is the target-token count of the accumulation window summed over all ranks.
    """
    if window_tokens <= 0:
        raise ValueError(
            "an accumulation window holds no target tokens: every label is masked "
            "(check that rows have assistant turns and data.max_length leaves room for them)"
        )
    return window_tokens / world_size


@dataclass
class StepOutcome:
    grad_norm: float  # of the unscaled gradients, before clipping; inf/nan on an overflow
    skipped: bool
    scale_before: float | None
    scale_after: float | None
    nonfinite_params: list = field(default_factory=list)
    nonfinite_count: int = 0


def nonfinite_grad_params(
    named_params: Iterable[tuple[str, torch.nn.Parameter]], limit: int = 50
) -> tuple[list[str], int]:
    """Names (up to ``limit``) and count of parameters whose gradient holds inf or nan."""
    names, count = [], 0
    for name, p in named_params:
        if p.grad is not None and not torch.isfinite(p.grad).all():
            count += 1
            if len(names) < limit:
                names.append(name)
    return names, count


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    named_params: list[tuple[str, torch.nn.Parameter]],
    scaler: torch.amp.GradScaler | None = None,
    max_grad_norm: float | None = None,
) -> StepOutcome:
    """unscale -> clip -> step -> update -> zero_grad; a non-finite gradient skips the step.

    Without a scaler (fp32/bf16) a non-finite gradient also skips the step rather than writing
    nan into the weights, and is reported the same way.
    """
    params = [p for _, p in named_params]
    scale_before = float(scaler.get_scale()) if scaler is not None else None
    if scaler is not None:
        scaler.unscale_(optimizer)
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    grad_norm = float(norm)
    finite = math.isfinite(grad_norm)
    # Attribute before clipping: clipping by a non-finite norm would smear nan over every gradient.
    names, count = ([], 0) if finite else nonfinite_grad_params(named_params)
    if finite and max_grad_norm:
        torch.nn.utils.clip_grads_with_norm_(params, max_grad_norm, norm, foreach=True)
    if scaler is not None:
        scaler.step(optimizer)  # skips optimizer.step() itself when unscale_ found inf/nan
        scaler.update()
    elif finite:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scale_after = float(scaler.get_scale()) if scaler is not None else None
    return StepOutcome(grad_norm, not finite, scale_before, scale_after, names, count)
