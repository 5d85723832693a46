"""GRPO under DDP: two gloo ranks each sample rollouts for their own prompts, the loss is normalised by the
completion tokens of both ranks, and rank 0 writes the rollout and policy_mismatch events."""
import pytest

from tests.conftest import SAMPLES

from .conftest import events_of, launch_and_wait, make_config


@pytest.mark.slow  # ~30 s: two worker processes
def test_grpo_trains_under_ddp(tmp_path):
    cfg = make_config(tmp_path / "runs", **{
        "training.method": "grpo", "data.train": str(SAMPLES / "phone_actions_reasoning" / "train.jsonl"),
        "data.max_length": 256, "schedule.max_steps": 2, "schedule.micro_batch_size": 1, "rl.group_size": 2,
        "rl.max_new_tokens": 4, "sharding.strategy": "ddp", "sharding.nproc_per_node": 2, "output.run_name": "ddp"})
    run_dir = launch_and_wait(cfg)
    mismatch = events_of(run_dir, "policy_mismatch")
    assert [m.step for m in mismatch] == [1, 2] and {m.rank for m in mismatch} == {0}
    steps = events_of(run_dir, "step")
    # the step's tokens are both ranks' completion tokens, as the mismatch figures are
    assert [s.tokens for s in steps] == [m.tokens for m in mismatch]
    assert {e.rank for e in events_of(run_dir, "memory")} == {0, 1}


@pytest.mark.slow  # ~30 s: two worker processes
def test_grpo_draws_again_on_both_ranks_together_and_trains_on_when_no_group_has_a_spread(tmp_path):
    """rl.max_draws under DDP: whether to draw again is decided over both ranks (each draws as often: no rank waits
    in a collective alone); an untrained tiny model's 4 tokens never parse, every reward is 0 and no group has a
    spread, so each micro-batch draws max_draws times and trains on its last draw (advantages 0) on both ranks."""
    cfg = make_config(tmp_path / "runs", **{
        "training.method": "grpo", "data.train": str(SAMPLES / "phone_actions_reasoning" / "train.jsonl"),
        "data.max_length": 256, "schedule.max_steps": 2, "schedule.micro_batch_size": 1, "rl.group_size": 2,
        "rl.max_new_tokens": 4, "rl.max_draws": 3, "sharding.strategy": "ddp", "sharding.nproc_per_node": 2,
        "output.run_name": "ddp-draws"})
    run_dir = launch_and_wait(cfg)
    rollouts = events_of(run_dir, "rollout")
    draws = 3 * cfg.schedule.grad_accum_steps  # each micro-batch's 3
    assert [(r.step, r.draws, r.trained_groups, r.all_equal_groups) for r in rollouts] == [
        (1, draws, 0, 1.0), (2, draws, 0, 1.0)]
    steps = events_of(run_dir, "step")
    assert [s.step for s in steps] == [1, 2] and [s.grad_norm for s in steps] == [0.0, 0.0]
