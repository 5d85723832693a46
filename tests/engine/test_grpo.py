"""GRPO in the engine (training.method grpo) on the tiny GLM-4 and the phone-action rows: rollouts sampled by the
model being trained, rewards by name, rollout and policy_mismatch events, precision policies, accumulation over
groups, exact resume, and a reward that raises stopping the run with its name and the row."""

import math
from pathlib import Path

import pytest
import torch

from tests.conftest import SAMPLES
from workbench import train
from workbench.config.names import REWARDS
from workbench.events import iter_events
from workbench.hardware import cpu_has_fast_bf16
from workbench.rewards import REWARD_FUNCTIONS, register_reward, unregister_reward

ROWS = str(SAMPLES / "phone_actions_reasoning" / "train.jsonl")


def grpo(make_cfg, **overrides):
    return make_cfg(
        **{
            "training.method": "grpo",
            "data.train": ROWS,
            "data.max_length": 256,  # lora.dropout: GRPO derives 0
            "schedule.micro_batch_size": 2,
            "schedule.max_steps": 2,
            "rl.group_size": 3,
            "rl.max_new_tokens": 6,
            "rl.rewards": {"format": 1.0, "action_type": 1.0, "length": 0.1},
            **overrides,
        }
    )


@pytest.fixture(autouse=True)
def length_reward():
    # a reward that varies within a group, so that advantages are not all 0 on an untrained tiny model
    register_reward("length", lambda example, completion, verdict: len(completion) / 10.0)
    yield
    unregister_reward("length")


def events_of(run_dir, kind):
    return [e for e in iter_events(run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


def test_builtin_rewards_are_the_config_catalogue():
    unregister_reward("length")  # the plug-in of the other tests
    assert set(REWARD_FUNCTIONS) == set(REWARDS.names())


@pytest.mark.parametrize("mode", ["fp32", "bf16", "fp16", "pure-bf16"])
def test_grpo_steps_log_rollouts_and_the_mismatch_and_train_the_adapter(make_cfg, mode):
    r = train(grpo(make_cfg, **{"precision.mode": mode, "output.run_name": mode}))
    assert len(r.losses) == 2 and all(torch.isfinite(torch.tensor(r.losses)))
    rollouts, mismatch, steps = (events_of(r.run_dir, k) for k in ("rollout", "policy_mismatch", "step"))
    assert [e.step for e in rollouts] == [1, 2] and [e.step for e in mismatch] == [1, 2]
    ro = rollouts[0]
    assert ro.groups == 2 and ro.group_size == 3 and set(ro.rewards) == {"format", "action_type", "length"}
    assert ro.completion_tokens_max <= 6 and len(ro.samples) == 2  # rl.max_new_tokens
    assert ro.parse_rate == 0.0 and ro.rewards["format"]["mean"] == 0.0  # 6 tokens of an untrained model: no action
    assert set(ro.samples[0]) == {"prompt", "completion", "rewards", "total", "advantage"}
    m = mismatch[0]
    # every completion token of the step compared (rl.max_draws 1: each group drawn is trained), the loss divided by
    # their count; the ratio's extremes are exp of the largest log-probability gap, one way or the other
    assert m.precision == mode and m.tokens == steps[0].tokens == round(ro.completion_tokens_mean * 2 * 3)
    assert max(-math.log(m.ratio_min), math.log(m.ratio_max)) == pytest.approx(m.max_abs, rel=1e-4, abs=1e-12)
    # the same weights and policy: the trainer reproduces the sampler up to rounding, in fp32 to ~1e-6 as docs/grpo.md
    # says (4.8e-7 measured); in low precision to rounding of that precision (1.1e-3 in bf16 here): a trainer computing
    # in bf16 where fp32 was asked fails the first bound, one computing in fp32 where bf16 was asked the second
    # On a CPU with native bf16 (AVX-512 BF16 / AMX) the decode step and the full forward agree bit for bit in bf16
    # and fp16 alike (max_abs 0.0 measured on such an EPYC): there the lower bound cannot tell the precisions apart.
    low = 0.0 if cpu_has_fast_bf16() else 1e-5
    assert m.max_abs < 1e-5 and m.kl < 1e-10 if mode == "fp32" else low <= m.max_abs < 1e-2 and m.kl < 1e-5
    from safetensors.torch import load_file

    trained = load_file(str(r.run_dir / "adapter" / "adapter_model.safetensors"))
    # LoRA B starts at 0: a nonzero B means the rewards' advantages reached the adapter through the loss
    assert any(float(v.abs().max()) > 0 for k, v in trained.items() if "lora_B" in k)


def test_grpo_resumes_exactly_with_the_same_rollouts(make_cfg):
    common = {
        "schedule.max_steps": 4,
        "checkpointing.every_steps": 2,
        "checkpointing.keep_last": 5,
        "precision.mode": "fp16",
        "precision.growth_interval": 1,
        "schedule.grad_accum_steps": 2,
        "schedule.micro_batch_size": 1,
        "rl.kl_coef": 0.05,
    }
    full = train(grpo(make_cfg, **common, **{"output.run_name": "full"}))
    step2 = next(p for p in (full.run_dir / "checkpoints").iterdir() if p.name.endswith("0000002"))
    resumed = train(grpo(make_cfg, **common, **{"output.run_name": "resumed", "checkpointing.resume_from": str(step2)}))
    assert resumed.losses == full.losses[2:]
    a = [e.samples for e in events_of(full.run_dir, "rollout")][2:]
    b = [e.samples for e in events_of(resumed.run_dir, "rollout")]
    assert a == b
    # with a reference (kl_coef > 0) each step says how far the policy has moved from it: 0 until an update went
    # through (fp16 skips the overflowing ones), then more
    kl = [e.reference_kl for e in events_of(full.run_dir, "rollout")]
    skipped = [e.skipped for e in events_of(full.run_dir, "step")]
    assert [k > 0 for k in kl] == [not all(skipped[:i]) for i in range(len(kl))], (kl, skipped)
    assert kl[2:] == pytest.approx([e.reference_kl for e in events_of(resumed.run_dir, "rollout")])


@pytest.mark.parametrize("scale", ["group", "none"])
def test_scale_rewards_none_keeps_the_rewards_scale_in_the_advantages(make_cfg, scale):
    # groups of 2: the first completion's advantage is +-1 (or 0) scaled by the group's std, (t1 - t2) / 2 unscaled;
    # length x 100 makes an unscaled advantage far above 1 wherever the two lengths differ
    r = train(
        grpo(
            make_cfg,
            **{
                "rl.group_size": 2,
                "rl.rewards": {"length": 100.0},
                "rl.scale_rewards": scale,
                "output.run_name": scale,
            },
        )
    )
    advantages = [abs(s["advantage"]) for e in events_of(r.run_dir, "rollout") for s in e.samples]
    assert advantages and any(a > 0 for a in advantages)
    if scale == "group":
        assert all(a == pytest.approx(1.0, abs=1e-3) or a == 0 for a in advantages), advantages
    else:
        assert any(a > 2 for a in advantages), advantages


def test_mask_truncated_completions_leaves_the_cut_answers_out_of_the_loss(make_cfg):
    """rl.mask_truncated_completions: an untrained model's completions nearly never reach a stop token in 3 tokens,
    and the cut ones are not trained on: a step whose completions were all cut has no token in the loss or its count
    and a zero gradient; otherwise only the finished completions' tokens count (fewer than the mismatch compared)."""
    r = train(
        grpo(
            make_cfg,
            **{
                "rl.mask_truncated_completions": True,
                "rl.max_new_tokens": 3,
                "schedule.max_steps": 3,
                "output.run_name": "masked",
            },
        )
    )
    rollouts, steps, mismatch = (events_of(r.run_dir, k) for k in ("rollout", "step", "policy_mismatch"))
    assert any(ro.truncated == 1.0 for ro in rollouts)
    for ro, st, m in zip(rollouts, steps, mismatch):
        assert m.tokens == round(ro.completion_tokens_mean * ro.groups * ro.group_size)  # still measured on all
        if ro.truncated == 1.0:
            assert (st.tokens, st.loss, st.grad_norm) == (0, 0.0, 0.0)
        else:
            assert 0 < st.tokens < m.tokens


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask"])
def test_importance_sampling_reports_the_weights_it_applied(make_cfg, mode):
    """rl.importance_sampling in bf16 with a cap just above 1: the mismatch event says the mean weight the loss
    applied (within the ratios' range, never above the cap; 0 for masked tokens) and the share of tokens over the
    cap, which is the share whose ratio exceeds it (none where sampler and trainer agree bit for bit)."""
    cap = 1.0005
    r = train(
        grpo(
            make_cfg,
            **{
                "precision.mode": "bf16",
                "rl.importance_sampling": mode,
                "rl.importance_sampling_cap": cap,
                "output.run_name": mode,
            },
        )
    )
    for m in events_of(r.run_dir, "policy_mismatch"):
        assert (m.is_capped > 0) == (m.ratio_max > cap), m
        low = 0.0 if mode == "token_mask" and m.is_capped else min(m.ratio_min, cap)
        assert low - 1e-6 <= m.is_weight_mean <= min(m.ratio_max, cap) + 1e-6, m
    plain = events_of(train(grpo(make_cfg, **{"output.run_name": f"plain-{mode}"})).run_dir, "policy_mismatch")
    # without importance sampling: the mismatch still reported every step, with no weights
    assert len(plain) == 2 and all(m.is_weight_mean is None and m.is_capped is None for m in plain)


SAMPLER_OFFSET = 0.02  # row r's sampler gives each of its tokens 0.02 x (r + 1) less log-probability than the model


@pytest.fixture(scope="module")
def one_step(tmp_path_factory):
    """One GRPO step of the tiny GLM-4 in fp32 (two prompts, groups of 3, up to 24 new tokens: one completion of the six
    stops early, so their lengths differ) under each setting named, with a sampler that disagrees with the trainer by
    a known amount (as a vLLM sampler may): row r's log-probabilities lowered by SAMPLER_OFFSET x (r + 1), a ratio of
    exp(0.02) to exp(0.12), inside the clip (0.2) and the cap. The same seed: the same rollouts in each run.
    {name: (the step's loss, its step event, its rollout event, its policy_mismatch event)}."""
    from tests.conftest import tiny_run_overrides
    from workbench.config import load_config
    from workbench.engine import grpo as grpo_module

    sample = grpo_module.sample_completions

    def disagreeing(*args, **kwargs):
        r = sample(*args, **kwargs)
        rows = torch.arange(1, r.sampler_logprobs.shape[0] + 1, dtype=r.sampler_logprobs.dtype).unsqueeze(1)
        r.sampler_logprobs = r.sampler_logprobs - SAMPLER_OFFSET * rows * r.completion_mask
        return r

    register_reward("length_24", lambda example, completion, verdict: len(completion) / 10.0)
    settings = {
        "dapo": {},
        "dr_grpo": {"rl.loss_type": "dr_grpo"},
        "importance_sampling": {"rl.importance_sampling": "token_truncate"},
    }
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grpo_module, "sample_completions", disagreeing)
        for name, overrides in settings.items():
            cfg = load_config(
                None,
                tiny_run_overrides(
                    tmp_path_factory.mktemp("one-step"),
                    **{
                        "training.method": "grpo",
                        "data.train": ROWS,
                        "data.max_length": 256,
                        "precision.mode": "fp32",
                        "schedule.micro_batch_size": 2,
                        "schedule.max_steps": 1,
                        "rl.group_size": 3,
                        "rl.max_new_tokens": 24,
                        "rl.rewards": {"length_24": 1.0},
                        "output.run_name": name,
                        **overrides,
                    },
                ),
            )
            r = train(cfg)
            out[name] = (
                r.losses[0],
                *(events_of(r.run_dir, kind)[0] for kind in ("step", "rollout", "policy_mismatch")),
            )
    unregister_reward("length_24")
    return out


def test_each_loss_type_divides_the_same_step_by_its_own_count(one_step):
    """rl.loss_type dr_grpo: the same step's loss (the same rollouts, the same per-token terms) divided by the
    completions x rl.max_new_tokens (6 x 24) where dapo divides by the completion tokens (fewer: one stopped early)."""
    (dapo, step, rollout, _), (dr_grpo, _, same, _) = one_step["dapo"], one_step["dr_grpo"]
    assert same.samples == rollout.samples
    assert step.tokens < 6 * 24 and rollout.truncated < 1.0, "no completion stopped early: the loss types coincide"
    assert dr_grpo * 6 * 24 == pytest.approx(dapo * step.tokens, rel=1e-6)
    assert dr_grpo != pytest.approx(dapo, rel=1e-3)


def test_importance_sampling_corrects_the_samplers_mismatch_once(one_step):
    """rl.importance_sampling token_truncate: the trainer is the old policy (the PPO ratio 1) and each token is
    weighted by trainer / sampler; without it the PPO ratio is that same trainer / sampler. With no ratio clipped or
    capped the two losses are one: the mismatch corrected once either way (corrected twice, the loss moves by the
    ratio, up to 12% here)."""
    (plain, _, rollout, _), (corrected, _, same, m) = one_step["dapo"], one_step["importance_sampling"]
    assert same.samples == rollout.samples
    assert m.ratio_max == pytest.approx(math.exp(6 * SAMPLER_OFFSET), rel=1e-4) and m.clipped == 0.0
    assert m.is_capped == 0.0 and m.is_weight_mean > math.exp(SAMPLER_OFFSET) - 1e-4
    assert abs(plain) > 1e-3  # lengths differ: the step's loss is no sum of advantages that cancel
    assert corrected == pytest.approx(plain, rel=1e-5)


@pytest.fixture
def odd_rows_only():
    # a spread for prompts of odd line numbers only: the even ones' groups are all equal (no learning signal)
    register_reward(
        "odd_length", lambda example, completion, verdict: len(completion) / 10.0 if example.index % 2 else 0.0
    )
    yield {"odd_length": 1.0}
    unregister_reward("odd_length")


def test_with_max_draws_a_step_trains_only_groups_with_a_spread_and_draws_again_for_them(make_cfg, odd_rows_only):
    """rl.max_draws > 1 (dynamic sampling): all-equal groups are dropped from the loss and its divisor, further
    prompts are drawn until the micro-batch holds micro_batch_size groups with a spread, and the stream stays exact
    on resume. With max_draws 1 every group drawn is trained, the equal ones' tokens in the divisor."""
    common = {
        "rl.rewards": odd_rows_only,
        "schedule.max_steps": 4,
        "checkpointing.every_steps": 2,
        "checkpointing.keep_last": 5,
    }
    plain = train(grpo(make_cfg, **common, **{"output.run_name": "plain"}))
    rollouts, steps = events_of(plain.run_dir, "rollout"), events_of(plain.run_dir, "step")
    assert all(e.draws is None and e.trained_groups is None for e in rollouts)
    assert any(0 < e.all_equal_groups for e in rollouts)  # even rows were drawn and trained
    dynamic = train(grpo(make_cfg, **common, **{"output.run_name": "dynamic", "rl.max_draws": 6}))
    rollouts, steps = events_of(dynamic.run_dir, "rollout"), events_of(dynamic.run_dir, "step")
    mismatch = events_of(dynamic.run_dir, "policy_mismatch")
    assert any(e.draws > 1 for e in rollouts)  # drew again for the groups an all-equal draw lacked
    for ro, st, mm in zip(rollouts, steps, mismatch):
        assert ro.groups == 2 * ro.draws and ro.trained_groups >= 2  # micro_batch_size groups with a spread, or more
        assert ro.trained_groups == round(ro.groups * (1 - ro.all_equal_groups))  # every group with a spread drawn
        assert st.tokens == mm.tokens  # the divisor counts the trained completions only ...
        if ro.all_equal_groups > 0:  # ... fewer than all drawn when a group was dropped
            assert st.tokens < ro.completion_tokens_mean * ro.groups * ro.group_size
    step2 = next(p for p in (dynamic.run_dir / "checkpoints").iterdir() if p.name.endswith("0000002"))
    resumed = train(
        grpo(
            make_cfg,
            **common,
            **{"output.run_name": "resumed", "rl.max_draws": 6, "checkpointing.resume_from": str(step2)},
        )
    )
    assert resumed.losses == dynamic.losses[2:]  # the extra draws advanced the saved stream position


def test_a_reward_that_raises_stops_the_run_naming_the_reward_and_the_row(make_cfg):
    def broken(example, completion, verdict):
        raise ZeroDivisionError("boom")

    register_reward("broken", broken)
    try:
        with pytest.raises(Exception, match=r"reward 'broken' raised on row \d+ of .*train.jsonl: ZeroDivisionError"):
            train(grpo(make_cfg, **{"rl.rewards": {"broken": 1.0}, "output.run_name": "broken"}))
    finally:
        unregister_reward("broken")
    failed = events_of(Path(make_cfg().output.runs_dir) / "broken", "run_failed")
    assert "reward 'broken'" in failed[0].error and failed[0].error_type == "RewardError"
