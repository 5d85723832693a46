"""GRPO with its rollouts sampled by a real vLLM (``rl.rollout_engine vllm``), at a temperature other than 1 and with
the adapter the run trains: what tests/engine/test_vllm_rollouts.py checks on a recorded answer, here end to end.

Marked ``vllm``: CI's vLLM step runs it after ``bash scripts/setup.sh --vllm``; a missing vLLM environment FAILS
(``start_vllm`` raises ``VllmMissing``), it never skips. One vLLM start (~1-2 min on 2 CPU cores, eager)."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES
from workbench.rewards import register_reward, unregister_reward

pytestmark = pytest.mark.vllm

ROWS = str(SAMPLES / "phone_actions_reasoning" / "train.jsonl")


@pytest.fixture
def length_reward():
    # SmolLM2 writes no action yet: a reward that differs within a group, so that the advantages move the adapter
    register_reward("length", lambda example, completion, verdict: len(completion) / 10.0)
    yield {"length": 1.0}
    unregister_reward("length")


def test_grpo_samples_from_vllm_at_temperature_07_with_the_adapter_it_trains(tmp_path, length_reward):
    """Three steps at rl.temperature 0.7, with rl.importance_sampling token_truncate (the correction TRL applies to
    vLLM rollouts). The trainer's log-probabilities (logits / 0.7) match vLLM's: vLLM is asked
    for the log-probabilities after temperature (--logprobs-mode processed_logprobs; its raw ones differ from these
    by ~0.2-0.5 nats a token at 0.7). From step 2 on the adapter has moved the policy away from the base (its KL to
    the base, reference_kl), and vLLM still samples what the trainer computes: the adapter of each step reaches vLLM
    (--enable-lora, loaded at run time under step-N). A vLLM sampling the base would show a mismatch KL equal to the
    reference KL."""
    from workbench import train
    from workbench.config import load_config
    from workbench.events import iter_events

    cfg = load_config(
        None,
        {
            "model.source": "smollm2-135m-instruct",
            "training.method": "grpo",
            "data.train": ROWS,
            "data.eval": None,
            "data.max_length": 512,
            "precision.mode": "fp32",
            "lora.r": 8,
            "schedule.max_steps": 3,
            "schedule.micro_batch_size": 2,
            "schedule.learning_rate": 2e-3,
            "schedule.warmup_steps": 0,
            "rl.rollout_engine": "vllm",
            "rl.temperature": 0.7,
            "rl.group_size": 4,
            "rl.max_new_tokens": 24,
            "rl.rewards": length_reward,
            "rl.kl_coef": 0.01,
            "rl.importance_sampling": "token_truncate",
            "diagnosis.enabled": False,
            "output.runs_dir": str(tmp_path / "runs"),
            "output.run_name": "vllm",
            "output.progress_bar": False,
        },
    )
    result = train(cfg)
    events = list(iter_events(result.run_dir / "events.jsonl"))
    mismatch = [e for e in events if e.type == "policy_mismatch"]
    rollouts = [e for e in events if e.type == "rollout"]
    assert [e.step for e in mismatch] == [1, 2, 3] and all(e.tokens > 0 for e in mismatch)
    for m in mismatch:  # fp32 in both engines: only the kernels differ
        assert m.mean_abs < 0.02 and m.kl < 1e-3, m
        # the truncated importance-sampling correction (TRL's, for vLLM rollouts): weights near 1, none at the cap
        assert abs(m.is_weight_mean - 1) < 0.02 and m.is_capped == 0.0, m
    moved = [r.reference_kl for r in rollouts]
    print(
        "mismatch mean_abs",
        [round(m.mean_abs, 5) for m in mismatch],
        "kl",
        [m.kl for m in mismatch],
        "reference_kl",
        moved,
        "is_weight_mean",
        [m.is_weight_mean for m in mismatch],
    )
    assert moved[0] == 0.0 and moved[2] > 1e-3, moved  # the adapter starts at 0, then trains
    for m, kl in zip(mismatch[1:], moved[1:]):
        assert m.kl < kl / 10, (m, kl)  # vLLM samples the trained adapter, not the base
