"""The one logit-agreement measure behind export parity gates and QAT's converted-vs-fake-quantized check."""

import math

import torch

from workbench.precision.parity import LogitAgreement, logit_agreement


def test_figures_count_real_positions_only():
    ref = torch.zeros(1, 3, 4)
    ref[0, :, 1] = 1.0  # greedy token 1 everywhere
    cand = ref.clone()
    cand[0, 1, 2] = 2.5  # position 1: the greedy token moves to 2, |diff| 2.5
    cand[0, 2, 3] = 100.0  # a padded position: ignored
    a = logit_agreement(ref, cand, torch.tensor([[1, 1, 0]]))
    assert (a.max_logit_diff, a.agreeing, a.positions) == (2.5, 1, 2) and a.greedy_agreement == 0.5


def test_pooled_batches_keep_the_worst_difference_and_a_nan():
    pooled = LogitAgreement() + LogitAgreement(0.5, 3, 4) + LogitAgreement(0.25, 4, 4)
    assert (pooled.max_logit_diff, pooled.greedy_agreement, pooled.positions) == (0.5, 7 / 8, 8)
    ref = torch.zeros(1, 2, 3)
    broken = logit_agreement(ref, torch.full((1, 2, 3), float("nan")), torch.ones(1, 2))
    assert math.isnan(broken.max_logit_diff)
    # in either order: max() alone would keep 0.5 and hide the NaN
    assert math.isnan((pooled + broken).max_logit_diff) and math.isnan((broken + pooled).max_logit_diff)
