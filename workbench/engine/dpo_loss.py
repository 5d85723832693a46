"""The DPO loss arithmetic on pure tensors, beside the SFT step arithmetic (``precision.step``) and GRPO's
(``engine.grpo_loss``); ``engine.dpo`` feeds it each pair's log-probabilities.

A pair is a prompt with two replies, chosen and rejected. Each reply's log-ratio is its log-probability under the
model being trained minus under the reference (the model as the run starts): ``pi - ref``. TRL's DPOTrainer
(``trl/trainer/dpo_trainer.py``, 1.16), whose arithmetic this matches (``tests/engine/test_dpo_loss.py`` calls it):

* ``sigmoid`` (DPO): ``-logsigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))``, each log-probability the *sum* over
  the reply's tokens.
* ``ipo`` (IPO): ``((pi_c - ref_c) / n_c - (pi_r - ref_r) / n_r - 1 / (2 * beta)) ** 2``: each reply's log-ratio
  *averaged* over its ``n`` tokens (TRL's length normalisation of IPO, confirmed with its authors), so beta means the
  same for short and long replies.

The implicit reward of a reply is ``beta * (pi - ref)`` (summed log-probabilities, for either loss, as TRL logs it);
a pair is ordered right when its chosen reward exceeds its rejected one (TRL's ``rewards/accuracies``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

LOSS_TYPES = ("sigmoid", "ipo")


def dpo_losses(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
    loss_type: str = "sigmoid",
    chosen_tokens: torch.Tensor | None = None,
    rejected_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    """[pairs] loss of each pair from its replies' summed log-probabilities ([pairs] each: the policy's, with
    gradients, and the reference's); ``ipo`` also takes each reply's token count (what its log-ratio is averaged
    over). The window's loss is their sum over the window's pairs divided by the pairs (TRL's mean)."""
    chosen_ratio = policy_chosen - ref_chosen.to(policy_chosen)
    rejected_ratio = policy_rejected - ref_rejected.to(policy_rejected)
    if loss_type == "sigmoid":
        return -F.logsigmoid(beta * (chosen_ratio - rejected_ratio))
    if loss_type == "ipo":
        if chosen_tokens is None or rejected_tokens is None:
            raise ValueError(
                "ipo averages each reply's log-ratio over its tokens: give chosen_tokens and rejected_tokens"
            )
        chosen_mean = chosen_ratio / chosen_tokens.to(chosen_ratio).clamp(min=1.0)
        rejected_mean = rejected_ratio / rejected_tokens.to(rejected_ratio).clamp(min=1.0)
        return (chosen_mean - rejected_mean - 1.0 / (2.0 * beta)) ** 2
    raise ValueError(f"unknown dpo loss_type {loss_type!r}: one of {', '.join(LOSS_TYPES)}")


@dataclass(frozen=True)
class RewardSums:
    """The implicit rewards of some pairs, as sums (summed over micro-batches and ranks, then divided by ``pairs``):
    the chosen and rejected replies' rewards, their margins, the pairs ordered right, the policy's log-probabilities
    of each side."""

    pairs: float
    chosen: float
    rejected: float
    margin: float
    right: float
    logp_chosen: float
    logp_rejected: float

    def as_list(self) -> list[float]:
        return [self.pairs, self.chosen, self.rejected, self.margin, self.right, self.logp_chosen, self.logp_rejected]

    @classmethod
    def total(cls, values: list[float]) -> RewardSums:
        return cls(*values)


def reward_sums(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> RewardSums:
    """The implicit rewards ``beta * (pi - ref)`` of a batch of pairs (detached), summed."""
    chosen = beta * (policy_chosen.detach().double() - ref_chosen.to(policy_chosen.device).double())
    rejected = beta * (policy_rejected.detach().double() - ref_rejected.to(policy_rejected.device).double())
    return RewardSums(
        float(chosen.numel()),
        float(chosen.sum()),
        float(rejected.sum()),
        float((chosen - rejected).sum()),
        float((chosen > rejected).sum()),
        float(policy_chosen.detach().double().sum()),
        float(policy_rejected.detach().double().sum()),
    )
