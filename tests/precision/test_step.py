import math

import pytest
import torch

from workbench.data import IGNORE_INDEX
from workbench.precision import (
    count_target_tokens,
    optimizer_step,
    token_loss_sum,
    window_loss_divisor,
)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(11, 8), torch.nn.Linear(8, 11))


def _batches():
    """Four sequences of unequal target lengths, in two micro-batches of two."""
    torch.manual_seed(1)
    ids = torch.randint(0, 11, (4, 9))
    labels = ids.clone()
    labels[0, 7:] = IGNORE_INDEX  # short
    labels[1, 2:] = IGNORE_INDEX  # very short
    labels[3, :3] = IGNORE_INDEX  # prompt masked
    return ids, labels


def _grads(model, micro_batches, normalise):
    model.zero_grad()
    window = sum(count_target_tokens(lb) for _, lb in micro_batches)
    for ids, lb in micro_batches:
        s = token_loss_sum(model(ids), lb)
        (
            s / window_loss_divisor(window)
            if normalise == "tokens"
            else torch.nn.functional.cross_entropy(
                model(ids)[:, :-1].reshape(-1, 11), lb[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX
            )
            / len(micro_batches)
        ).backward()
    return [p.grad.clone() for p in model.parameters()]


def test_token_normalised_accumulation_matches_one_big_batch():
    ids, labels = _batches()
    model = _model()
    whole = _grads(model, [(ids, labels)], "tokens")
    split = _grads(model, [(ids[:2], labels[:2]), (ids[2:], labels[2:])], "tokens")
    for a, b in zip(whole, split):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    # The naive mean-of-micro-batch-means weights the short sequences wrongly: the test above can fail.
    naive = _grads(model, [(ids[:2], labels[:2]), (ids[2:], labels[2:])], "mean")
    assert max((a - b).abs().max() for a, b in zip(whole, naive)) > 1e-3


def test_divisor_accounts_for_rank_averaging():
    assert window_loss_divisor(100, world_size=4) == 25
    with pytest.raises(ValueError, match="no target tokens"):
        window_loss_divisor(0)


def test_loss_is_fp32_even_for_half_logits():
    logits = torch.randn(2, 5, 7).half()
    labels = torch.randint(0, 7, (2, 5))
    assert token_loss_sum(logits, labels).dtype == torch.float32


def _step_setup(scale):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=1) if scale else None
    return model, opt, scaler


def test_overflow_skips_step_backs_off_scale_and_names_params():
    model, opt, scaler = _step_setup(1024.0)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.ones(1, 4)).sum()
    scaler.scale(loss).backward()
    model.bias.grad[0] = float("inf")
    out = optimizer_step(opt, list(model.named_parameters()), scaler, max_grad_norm=1.0)
    assert out.skipped and not math.isfinite(out.grad_norm)
    assert (out.scale_before, out.scale_after) == (1024.0, 512.0)
    assert out.nonfinite_params == ["bias"] and out.nonfinite_count == 1
    for b, p in zip(before, model.parameters()):
        assert torch.equal(b, p) and p.grad is None


def test_clean_step_unscales_before_clipping_and_grows_scale():
    model, opt, scaler = _step_setup(2.0**10)
    loss = model(torch.ones(1, 4)).sum()
    scaler.scale(loss).backward()
    out = optimizer_step(opt, list(model.named_parameters()), scaler, max_grad_norm=None)
    # The reported norm is of the true (unscaled) gradients: d(sum W x + b)/dW = 1 for 8 weights, 2 biases.
    assert out.grad_norm == pytest.approx(math.sqrt(10), rel=1e-6)
    assert not out.skipped and out.scale_after == 2.0**11


def test_clipping_limits_the_update():
    model, opt, _ = _step_setup(None)
    before = model.weight.detach().clone()
    (model(torch.ones(1, 4)).sum() * 100).backward()
    out = optimizer_step(opt, list(model.named_parameters()), None, max_grad_norm=1.0)
    assert out.grad_norm == pytest.approx(100 * math.sqrt(10), rel=1e-5)
    update = torch.cat([(before - model.weight).flatten()])
    assert update.norm() <= 0.1 * 1.0 + 1e-6


def test_nonfinite_without_scaler_is_skipped_not_applied():
    model, opt, _ = _step_setup(None)
    before = model.weight.detach().clone()
    model(torch.ones(1, 4)).sum().backward()
    model.weight.grad[0, 0] = float("nan")
    out = optimizer_step(opt, list(model.named_parameters()), None, max_grad_norm=1.0)
    assert out.skipped and out.nonfinite_params == ["weight"]
    assert torch.equal(before, model.weight)
