"""The DPO loss arithmetic (engine.dpo_loss) against TRL's own: DPOTrainer._compute_loss (TRL 1.16) run on the same
per-token log-probabilities, its model a stand-in that returns them, its reference log-probabilities precomputed."""

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from trl.trainer import dpo_trainer as trl_dpo  # noqa: E402 - the test extra installs trl (pyproject)

from workbench.engine.dpo_loss import dpo_losses, reward_sums


class _Accelerator:
    device = torch.device("cpu")

    def gather(self, x):
        return x

    gather_for_metrics = gather


def trl_loss(
    per_token: torch.Tensor,
    completion_mask: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
    loss_type: str,
) -> tuple[float, dict]:
    """TRL's loss and metrics of a batch laid out as TRL lays it: the chosen rows, then the rejected ones;
    ``per_token`` [2 x pairs, seq - 1] the model's log-probability of each next token (0 off the completion, as
    TRL's fused head returns it)."""
    rows, width = per_token.shape[0], per_token.shape[1] + 1
    outputs = SimpleNamespace(
        log_probs=per_token,
        entropy=torch.zeros_like(per_token),
        mean_logits=torch.zeros_like(per_token),
        is_top1=torch.zeros_like(per_token, dtype=torch.bool),
    )
    model = SimpleNamespace(training=True)
    trainer = SimpleNamespace(
        model=model,
        accelerator=_Accelerator(),
        aux_loss_enabled=False,
        ld_alpha=None,
        precompute_ref_logps=True,
        f_divergence_type="reverse_kl",
        loss_types=[loss_type],
        loss_weights=[1.0],
        beta=beta,
        use_weighting=False,
        label_smoothing=0.0,
        _metrics={"train": defaultdict(list)},
        _total_train_tokens=0,
        _tp_size=1,
    )
    inputs = {
        "input_ids": torch.zeros(rows, width, dtype=torch.long),
        "attention_mask": torch.ones(rows, width),
        "completion_mask": completion_mask,
        "ref_chosen_logps": ref_chosen,
        "ref_rejected_logps": ref_rejected,
    }
    loss = trl_dpo.DPOTrainer._compute_loss(trainer, lambda **kw: outputs, inputs, False)
    return float(loss), {k: v[-1] for k, v in trainer._metrics["train"].items()}


def _pairs(pairs=5, width=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    completion = torch.zeros(2 * pairs, width, dtype=torch.long)
    for row in range(2 * pairs):  # a prompt of 2..4 tokens, a reply of 1..(width - prompt) tokens
        start = int(torch.randint(2, 5, (1,), generator=g))
        end = int(torch.randint(start + 1, width + 1, (1,), generator=g))
        completion[row, start:end] = 1
    per_token = -torch.rand(2 * pairs, width - 1, generator=g, dtype=torch.float64) * 3 * completion[:, 1:]
    ref = -torch.rand(2 * pairs, generator=g, dtype=torch.float64) * 10
    return per_token, completion, ref[:pairs], ref[pairs:]


@pytest.mark.parametrize("loss_type,beta", [("sigmoid", 0.1), ("sigmoid", 2.0), ("ipo", 0.1), ("ipo", 0.5)])
def test_the_loss_and_rewards_are_trls_on_the_same_log_probabilities(loss_type, beta):
    per_token, completion, ref_c, ref_r = _pairs()
    expected, metrics = trl_loss(per_token, completion, ref_c, ref_r, beta, loss_type)
    sums, tokens = per_token.sum(dim=1), completion[:, 1:].sum(dim=1)
    pi_c, pi_r = sums.chunk(2)
    n_c, n_r = tokens.chunk(2)
    losses = dpo_losses(pi_c, pi_r, ref_c, ref_r, beta, loss_type, n_c, n_r)
    assert float(losses.mean()) == pytest.approx(expected, rel=1e-9)
    r = reward_sums(pi_c, pi_r, ref_c, ref_r, beta)
    assert r.pairs == 5
    assert r.chosen / r.pairs == pytest.approx(metrics["rewards/chosen"], rel=1e-9)
    assert r.rejected / r.pairs == pytest.approx(metrics["rewards/rejected"], rel=1e-9)
    assert r.margin / r.pairs == pytest.approx(metrics["rewards/margins"], rel=1e-9)
    assert r.right / r.pairs == pytest.approx(metrics["rewards/accuracies"])
    assert r.logp_chosen / r.pairs == pytest.approx(metrics["logps/chosen"], rel=1e-9)


def test_ipo_averages_over_tokens_and_the_rejected_side_pulls_the_gradient_down():
    pi_c = torch.tensor([-4.0], requires_grad=True)
    pi_r = torch.tensor([-6.0], requires_grad=True)
    ref_c, ref_r = torch.tensor([-5.0]), torch.tensor([-5.0])
    loss = dpo_losses(pi_c, pi_r, ref_c, ref_r, 0.5, "sigmoid").sum()
    loss.backward()
    # chosen up, rejected down: the gradients of a loss to minimise have opposite signs, equal size
    assert pi_c.grad.item() < 0 < pi_r.grad.item() and pi_c.grad.item() == pytest.approx(-pi_r.grad.item())
    # ipo: the same log-ratios over 4 and 2 tokens are 0.25 and -0.5 per token; the target margin 1/(2 beta) = 1
    ipo = dpo_losses(pi_c.detach(), pi_r.detach(), ref_c, ref_r, 0.5, "ipo", torch.tensor([4]), torch.tensor([2]))
    assert float(ipo) == pytest.approx((0.25 + 0.5 - 1.0) ** 2)
    with pytest.raises(ValueError, match="chosen_tokens"):
        dpo_losses(pi_c, pi_r, ref_c, ref_r, 0.5, "ipo")
