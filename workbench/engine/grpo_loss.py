"""The GRPO loss arithmetic, in one place beside the SFT step arithmetic (``precision.step``).

* Group-normalised advantages: each completion's reward minus its group's mean, over the group's standard
  deviation (a group whose rewards are all equal teaches nothing: its advantages are 0).
* The clipped surrogate per completion token, with the importance ratio ``exp(logp_trainer - logp_sampler)``:
  the old policy is the sampler itself, so with one update per rollout the ratio is 1 in exact arithmetic and
  anything else is the numerical training-inference mismatch (what ``mismatch_stats`` measures).
* The optional KL penalty to a reference (k3 estimator, ``exp(ref - new) - (ref - new) - 1``, never negative).
* Normalised as ``rl.loss_type`` says (``loss_normalisation``: TRL's four, over the whole accumulation window and
  all ranks): ``dapo`` (the default) by tokens as the SFT loss is, the *sum* over a micro-batch's completion tokens
  divided by ``window_loss_divisor`` (completion tokens of the whole window), so a long completion weighs by its
  tokens, not as one sample; ``grpo`` each completion's mean over its tokens, averaged over the completions;
  ``dr_grpo`` the sum over completions x ``max_new_tokens``; ``bnpo`` each micro-batch's token mean, averaged over
  the micro-batches.
* Optionally the truncated importance-sampling correction of the sampler/trainer mismatch (``importance_weights``:
  TRL's ``vllm_importance_sampling_correction``): the old policy is then the trainer itself (its own log-probabilities,
  detached: ratio 1, no clip from the mismatch) and each token's loss is weighted by exp(trainer - sampler), capped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4, scale: bool = True) -> torch.Tensor:
    """(reward - group mean) / (group std + eps) for rewards laid out group after group ([groups * group_size]);
    ``scale=False``: reward - group mean (Dr. GRPO): a group whose rewards differ by a shaping term alone then
    weighs by that small difference, not as much as one that differs in success."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.double().view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if not scale:
        return centred.view(-1).float()
    std = grouped.std(dim=1, unbiased=False, keepdim=True)
    return (centred / (std + eps)).view(-1).float()


def all_equal_groups(rewards: torch.Tensor, group_size: int) -> float:
    """The share of groups whose rewards are all equal (they carry no learning signal)."""
    groups = rewards.numel() // group_size
    return 1.0 - len(groups_with_spread(rewards, group_size)) / groups


def groups_with_spread(rewards: torch.Tensor, group_size: int) -> list[int]:
    """The indices of the groups whose rewards are not all equal: the only ones with nonzero advantages, so the
    only ones a GRPO gradient comes from (an all-equal group adds completion tokens to the divisor, nothing else)."""
    grouped = rewards.view(-1, group_size)
    return [int(g) for g in torch.nonzero(grouped.max(dim=1).values != grouped.min(dim=1).values).flatten()]


def k3(delta: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimate of KL(q || p) per token from ``delta = log p - log q`` of tokens sampled from q:
    ``exp(delta) - delta - 1``, never negative, unbiased, lower variance than ``-delta``."""
    return torch.exp(delta) - delta - 1.0


LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo")
IMPORTANCE_SAMPLING = ("none", "token_truncate", "token_mask")


def grpo_loss_sum(
    logp: torch.Tensor,
    logp_sampler: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float,
    kl_coef: float = 0.0,
    logp_ref: torch.Tensor | None = None,
    row_weights: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """The summed GRPO loss over the completion tokens (``mask`` 1) of a micro-batch: per token
    ``-min(r * A, clip(r, 1 - eps, 1 + eps) * A) + kl_coef * k3(ref, new)``, ``r = exp(logp - logp_sampler)``.

    ``logp``: [rows, tokens] the trainer's log-probabilities (with grad); ``logp_sampler`` the sampler's, as it
    computed them (with the importance-sampling correction: the trainer's own, detached); ``advantages`` [rows];
    ``logp_ref`` the reference's (needed when ``kl_coef`` > 0); ``row_weights`` [rows] each completion's weight in
    the sum (``loss_normalisation``; default 1); ``token_weights`` [rows, tokens] each token's surrogate weight (the
    importance weights, ``importance_weights``; default 1). fp32."""
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - logp_sampler.detach())
    adv = advantages.to(logp.dtype).unsqueeze(1)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_range, 1.0 + clip_range) * adv)
    per_token = -surrogate if token_weights is None else -surrogate * token_weights.detach().to(logp.dtype)
    if kl_coef > 0:
        if logp_ref is None:
            raise ValueError("kl_coef > 0 needs the reference log-probabilities")
        per_token = per_token + kl_coef * k3(logp_ref.detach() - logp)
    if row_weights is not None:
        mask = mask * row_weights.to(logp.dtype).unsqueeze(1)
    return (per_token * mask).sum()


@torch.no_grad()
def importance_weights(logp: torch.Tensor, logp_sampler: torch.Tensor, mode: str, cap: float) -> torch.Tensor:
    """Truncated importance sampling of the sampler/trainer mismatch (TRL's ``vllm_importance_sampling_mode``):
    per token ``w = exp(logp_trainer - logp_sampler)``, capped at ``cap`` (``token_truncate``) or 0 above it
    (``token_mask``): the trainer's distribution is the one trained, the sampler's the one sampled from."""
    if mode not in IMPORTANCE_SAMPLING[1:]:
        raise ValueError(f"importance sampling {mode!r}: use one of {', '.join(IMPORTANCE_SAMPLING[1:])}")
    w = torch.exp(logp.detach().float() - logp_sampler.float())
    return w.clamp(max=cap) if mode == "token_truncate" else torch.where(w > cap, torch.zeros_like(w), w)


@torch.no_grad()
def importance_stats(
    weights: torch.Tensor, logp: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[float, int, int]:
    """(sum of the importance weights, tokens whose ratio exceeded ``cap``, tokens) over ``mask``: what the
    correction did, for the mismatch event."""
    keep = mask.bool()
    over = torch.exp(logp.detach().double() - logp_sampler.double()) > cap
    return float(weights.double()[keep].sum()), int(over[keep].sum()), int(keep.sum())


def loss_normalisation(
    loss_type: str, masks: list[torch.Tensor], max_new_tokens: int
) -> tuple[list[torch.Tensor], float]:
    """How ``loss_type`` normalises a window's GRPO loss (TRL's GRPOTrainer ``loss_type``, over the accumulation
    window): for each micro-batch's completion mask [rows, tokens], its rows' weights in the summed loss, and this
    rank's part of the count the weighted sum is divided by (summed over ranks by the caller, then
    ``window_loss_divisor``):

    * ``dapo``: 1 per token / the window's completion tokens (the token mean over the window, as SFT's loss);
    * ``grpo``: 1 / the completion's tokens / the window's completions (each completion's token mean, averaged);
    * ``dr_grpo``: 1 per token / (the window's completions x ``max_new_tokens``) (a constant per completion);
    * ``bnpo``: 1 / its micro-batch's tokens / the window's micro-batches (each micro-batch's token mean, averaged).
    """
    if loss_type == "dapo":
        return [torch.ones(m.shape[0]) for m in masks], float(sum(int(m.sum()) for m in masks))
    if loss_type == "grpo":
        return [1.0 / m.sum(dim=1).float().clamp(min=1) for m in masks], float(sum(m.shape[0] for m in masks))
    if loss_type == "dr_grpo":
        return [torch.ones(m.shape[0]) for m in masks], float(sum(m.shape[0] for m in masks) * max_new_tokens)
    if loss_type == "bnpo":
        return [torch.full((m.shape[0],), 1.0 / max(1, int(m.sum()))) for m in masks], float(len(masks))
    raise ValueError(f"loss type {loss_type!r}: use one of {', '.join(LOSS_TYPES)}")


@torch.no_grad()
def reference_kl_sum(logp: torch.Tensor, logp_ref: torch.Tensor, mask: torch.Tensor) -> float:
    """The k3 estimate of KL(trainer || reference), summed over the completion tokens (``mask`` 1): how far the
    policy has moved from where it started, the quantity ``kl_coef`` penalises."""
    return float((k3(logp_ref.double() - logp.detach().double()) * mask.double()).sum())


@dataclass(frozen=True)
class Mismatch:
    """How far the trainer's log-probabilities of the sampled tokens are from the sampler's."""

    tokens: int
    abs_sum: float  # sum over tokens of |logp_sampler - logp_trainer| (mean: abs_sum / tokens)
    abs_max: float
    ratio_min: float  # importance ratio exp(logp_trainer - logp_sampler)
    ratio_max: float
    ratio_sq_dev_sum: float  # sum of (ratio - 1)^2: the ratio's spread around 1
    kl_sum: float  # sum of the k3 estimate of KL(sampler || trainer)
    clipped: int  # tokens whose ratio is outside 1 +- clip_range

    def as_sums(self) -> list[float]:
        return [self.tokens, self.abs_sum, self.ratio_sq_dev_sum, self.kl_sum, self.clipped]


@torch.no_grad()
def mismatch_stats(logp: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor, clip_range: float) -> Mismatch:
    keep = mask.bool()
    delta = (logp.detach().double() - logp_sampler.double())[keep]  # trainer - sampler
    if delta.numel() == 0:
        return Mismatch(0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0)
    ratio = torch.exp(delta)
    return Mismatch(
        tokens=int(delta.numel()),
        abs_sum=float(delta.abs().sum()),
        abs_max=float(delta.abs().max()),
        ratio_min=float(ratio.min()),
        ratio_max=float(ratio.max()),
        ratio_sq_dev_sum=float(((ratio - 1) ** 2).sum()),
        kl_sum=float(k3(delta).sum()),  # KL(sampler || trainer): samples of the sampler, p = trainer
        clipped=int(((ratio < 1 - clip_range) | (ratio > 1 + clip_range)).sum()),
    )
