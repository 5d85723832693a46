"""The GRPO arithmetic: group-normalised advantages, the clipped surrogate, the KL penalty, token normalisation, the
loss types, the importance-sampling correction and the mismatch figures, checked against hand-computed values."""

import math

import pytest
import torch

from workbench.engine.grpo_loss import (
    LOSS_TYPES,
    all_equal_groups,
    group_advantages,
    groups_with_spread,
    grpo_loss_sum,
    importance_stats,
    importance_weights,
    loss_normalisation,
    mismatch_stats,
    reference_kl_sum,
)
from workbench.precision import window_loss_divisor


def test_advantages_are_normalised_within_each_group_and_zero_for_an_all_equal_group():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    adv = group_advantages(rewards, 4)
    # group 1: mean 0.5, std 0.5 -> +-1; group 2: all equal -> 0 (no signal, no nan)
    torch.testing.assert_close(adv, torch.tensor([1.0, -1.0, -1.0, 1.0, 0, 0, 0, 0]), atol=1e-3, rtol=0)
    assert all_equal_groups(rewards, 4) == 0.5 and groups_with_spread(rewards, 4) == [0]
    assert groups_with_spread(torch.tensor([2.0, 2.0, 0.0, 1.0, 1.0, 1.0]), 2) == [1]
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(rewards, 3)


def test_unscaled_advantages_keep_the_rewards_scale_so_a_shaping_only_group_weighs_less_than_a_success_one():
    # group 1 differs by a 0.25 shaping term alone, group 2 in success (1.25 vs 0.25)
    rewards = torch.tensor([0.25, 0.0, 0.0, 0.0, 1.25, 0.25, 0.25, 0.25])
    scaled = group_advantages(rewards, 4)
    torch.testing.assert_close(scaled[:4], scaled[4:], atol=3e-3, rtol=0)  # GRPO: +1.73 for either (eps aside)
    assert float(scaled[0]) == pytest.approx(math.sqrt(3), abs=3e-3)
    unscaled = group_advantages(rewards, 4, scale=False)
    torch.testing.assert_close(unscaled, torch.tensor([0.1875, -0.0625, -0.0625, -0.0625, 0.75, -0.25, -0.25, -0.25]))
    torch.testing.assert_close(group_advantages(torch.full((4,), 3.0), 4, scale=False), torch.zeros(4))


def test_on_policy_loss_is_minus_advantage_per_token_and_its_gradient_pushes_logp_by_the_advantage():
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -9.0]], requires_grad=True)
    sampler = logp.detach().clone()
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([2.0, -1.0])
    loss = grpo_loss_sum(logp, sampler, adv, mask, clip_range=0.2)
    assert float(loss.detach()) == pytest.approx(-(3 * 2.0) - (2 * -1.0))  # ratio 1: -sum A over the masked tokens
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-2.0, -2.0, -2.0], [1.0, 1.0, 0.0]]))


def test_the_ratio_is_clipped_only_where_it_would_gain_past_the_clip():
    sampler = torch.zeros(1, 4)
    logp = torch.tensor([[math.log(1.5), math.log(1.5), math.log(0.5), math.log(0.5)]], requires_grad=True)
    adv_pos = torch.tensor([1.0])
    mask = torch.tensor([[1, 0, 0, 0]])
    # A > 0 and r = 1.5 > 1.2: clipped at 1.2, no gradient
    loss = grpo_loss_sum(logp, sampler, adv_pos, mask, clip_range=0.2)
    assert float(loss.detach()) == pytest.approx(-1.2)
    loss.backward()
    assert float(logp.grad.abs().sum()) == 0
    # A < 0 and r = 0.5 < 0.8: min(-0.5, -0.8) = -0.8 (clipped, no gradient); r = 1.5 with A < 0 is not clipped
    logp.grad = None
    loss = grpo_loss_sum(logp, sampler, torch.tensor([-1.0]), torch.tensor([[1, 0, 1, 0]]), clip_range=0.2)
    assert float(loss.detach()) == pytest.approx(1.5 + 0.8)
    loss.backward()
    assert float(logp.grad[0, 0]) == pytest.approx(1.5) and float(logp.grad[0, 2]) == 0


def test_kl_penalty_is_the_k3_estimate_and_zero_when_the_policy_is_the_reference():
    logp = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -2.0]])
    mask = torch.ones(1, 2)
    zero_adv = torch.zeros(1)
    got = grpo_loss_sum(logp, logp, zero_adv, mask, 0.2, kl_coef=0.5, logp_ref=ref)
    expected = 0.5 * (math.exp(-0.5) + 0.5 - 1)
    assert float(got) == pytest.approx(expected)
    assert float(grpo_loss_sum(logp, logp, zero_adv, mask, 0.2, kl_coef=0.5, logp_ref=logp)) == 0
    with pytest.raises(ValueError, match="reference"):
        grpo_loss_sum(logp, logp, zero_adv, mask, 0.2, kl_coef=0.5)


def test_the_reported_reference_kl_is_the_penalty_s_own_estimate_over_the_completion_tokens():
    """What a run with rl.kl_coef reports as its distance from the reference is the sum the penalty adds (per
    kl_coef), masked tokens left out; 0 at the reference."""
    logp = torch.tensor([[-1.0, -2.0, -0.3]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    penalty = grpo_loss_sum(logp, logp, torch.zeros(1), mask, 0.2, kl_coef=1.0, logp_ref=ref)
    assert (
        reference_kl_sum(logp, ref, mask)
        == pytest.approx(float(penalty.detach()))
        == pytest.approx(math.exp(-0.5) - 0.5)
    )
    assert reference_kl_sum(logp, logp.detach(), mask) == 0


def test_token_normalisation_weighs_long_completions_by_their_tokens_as_sft_does():
    # two micro-batches of unequal completion lengths accumulate to the mean over all tokens of the window
    logp_a = torch.zeros(1, 3, requires_grad=True)
    logp_b = torch.zeros(1, 1, requires_grad=True)
    ma, mb = torch.ones(1, 3), torch.ones(1, 1)
    divisor = window_loss_divisor(4)
    total = (
        grpo_loss_sum(logp_a, logp_a.detach(), torch.tensor([1.0]), ma, 0.2) / divisor
        + grpo_loss_sum(logp_b, logp_b.detach(), torch.tensor([-1.0]), mb, 0.2) / divisor
    )
    assert float(total.detach()) == pytest.approx((-3 + 1) / 4)


def test_mismatch_figures():
    sampler = torch.tensor([[-1.0, -1.0, -1.0, 0.0]])
    trainer = torch.tensor([[-1.1, -0.9, -1.0, 5.0]])  # the last token is masked out
    m = mismatch_stats(trainer, sampler, torch.tensor([[1, 1, 1, 0]]), clip_range=0.05)
    assert m.tokens == 3 and m.abs_sum == pytest.approx(0.2) and m.abs_max == pytest.approx(0.1)
    assert m.ratio_min == pytest.approx(math.exp(-0.1)) and m.ratio_max == pytest.approx(math.exp(0.1))
    assert m.clipped == 2
    assert m.kl_sum == pytest.approx((math.exp(-0.1) + 0.1 - 1) + (math.exp(0.1) - 0.1 - 1))
    assert mismatch_stats(sampler, sampler, torch.ones(1, 4), 0.2).abs_max == 0


def _window_loss(loss_type: str, logps: list, advantages: list, masks: list, max_new_tokens: int) -> float:
    """The window's loss as the GRPO step computes it: each micro-batch's weighted sum over the shared count."""
    rows, count = loss_normalisation(loss_type, masks, max_new_tokens)
    return (
        sum(
            float(grpo_loss_sum(lp, lp, a, m, 0.2, row_weights=w))
            for lp, a, m, w in zip(logps, advantages, masks, rows)
        )
        / count
    )


def test_each_loss_type_normalises_the_window_as_trl_documents_it():
    """TRL's GRPOTrainer loss_type, per micro-batch and then averaged over the accumulation (equal micro-batches):
    grpo = mean over completions of each one's token mean; bnpo = mean over micro-batches of the token mean;
    dr_grpo = sum / (completions x max_completion_length); dapo = sum / the window's tokens. On policy (ratio 1)
    each token's loss is -A; the completions are 3, 1, 2 and 4 tokens long, so every pair of types differs."""
    masks = [torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]]), torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])]
    advantages = [torch.tensor([1.0, -2.0]), torch.tensor([0.5, 3.0])]
    logps = [torch.full((2, 4), -1.0), torch.full((2, 4), -2.0)]
    per_token = [[-1.0] * 3, [2.0], [-0.5] * 2, [-3.0] * 4]  # -A on each completion token
    flat = [x for c in per_token for x in c]
    expected = {
        "grpo": sum(sum(c) / len(c) for c in per_token) / 4,
        "bnpo": (sum(per_token[0] + per_token[1]) / 4 + sum(per_token[2] + per_token[3]) / 6) / 2,
        "dr_grpo": sum(flat) / (4 * 8),
        "dapo": sum(flat) / len(flat),
    }
    got = {t: _window_loss(t, logps, advantages, masks, max_new_tokens=8) for t in LOSS_TYPES}
    assert got == pytest.approx(expected)
    assert len({round(v, 6) for v in got.values()}) == 4  # four different normalisations, none a no-op of another
    with pytest.raises(ValueError, match="loss type 'sum'"):
        loss_normalisation("sum", masks, 8)


def test_truncated_importance_sampling_weights_each_tokens_loss_by_its_capped_ratio():
    """rl.importance_sampling: the trainer is the old policy (ratio 1, no clip from the mismatch) and each token's loss
    is scaled by w = exp(logp trainer - logp sampler), capped at C (token_truncate) or 0 above C (token_mask): the loss
    and its gradient change by exactly that ratio."""
    gaps = [math.log(0.5), 0.0, math.log(1.5), math.log(5.0)]  # trainer - sampler per token
    sampler = torch.tensor([[-2.0, -2.0, -2.0, -2.0]])
    logp = (sampler + torch.tensor([gaps])).requires_grad_(True)
    mask, adv = torch.ones(1, 4), torch.tensor([2.0])
    truncate = importance_weights(logp, sampler, "token_truncate", cap=3.0)
    torch.testing.assert_close(truncate, torch.tensor([[0.5, 1.0, 1.5, 3.0]]))
    masked = importance_weights(logp, sampler, "token_mask", cap=3.0)
    torch.testing.assert_close(masked, torch.tensor([[0.5, 1.0, 1.5, 0.0]]))
    loss = grpo_loss_sum(logp, logp.detach(), adv, mask, clip_range=0.2, token_weights=truncate)
    assert float(loss.detach()) == pytest.approx(-2.0 * (0.5 + 1.0 + 1.5 + 3.0))  # -A x w per token
    loss.backward()
    torch.testing.assert_close(logp.grad, -2.0 * truncate)  # d(-A w r)/d logp at r = 1
    # without the correction the sampler is the old policy: the 5x token is clipped at 1.2, the 0.5x one is not
    plain = grpo_loss_sum(logp.detach(), sampler, adv, mask, clip_range=0.2)
    assert float(plain) == pytest.approx(-2.0 * (0.5 + 1.0 + 1.2 + 1.2))
    total, capped, tokens = importance_stats(truncate, logp, sampler, mask, cap=3.0)
    assert (total, capped, tokens) == (pytest.approx(6.0), 1, 4)
    with pytest.raises(ValueError, match="importance sampling 'none'"):
        importance_weights(logp, sampler, "none", 3.0)
