"""GRPO under DDP: two gloo ranks each sample rollouts for their own prompts, the loss is normalised by the
completion tokens of both ranks, and rank 0 writes the rollout and policy_mismatch events."""

import pytest

from tests.conftest import SAMPLES

from .conftest import events_of, launch_and_wait, make_config


@pytest.mark.slow  # ~30 s: two worker processes
def test_grpo_trains_under_ddp(tmp_path):
    cfg = make_config(
        tmp_path / "runs",
        **{
            "training.method": "grpo",
            "data.train": str(SAMPLES / "phone_actions_reasoning" / "train.jsonl"),
            "data.max_length": 256,
            "schedule.max_steps": 2,
            "schedule.micro_batch_size": 1,
            "rl.group_size": 2,
            "rl.max_new_tokens": 4,
            "sharding.strategy": "ddp",
            "sharding.nproc_per_node": 2,
            "output.run_name": "ddp",
        },
    )
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
    cfg = make_config(
        tmp_path / "runs",
        **{
            "training.method": "grpo",
            "data.train": str(SAMPLES / "phone_actions_reasoning" / "train.jsonl"),
            "data.max_length": 256,
            "schedule.max_steps": 2,
            "schedule.micro_batch_size": 1,
            "rl.group_size": 2,
            "rl.max_new_tokens": 4,
            "rl.max_draws": 3,
            "sharding.strategy": "ddp",
            "sharding.nproc_per_node": 2,
            "output.run_name": "ddp-draws",
        },
    )
    run_dir = launch_and_wait(cfg)
    rollouts = events_of(run_dir, "rollout")
    draws = 3 * cfg.schedule.grad_accum_steps  # each micro-batch's 3
    assert [(r.step, r.draws, r.trained_groups, r.all_equal_groups) for r in rollouts] == [
        (1, draws, 0, 1.0),
        (2, draws, 0, 1.0),
    ]
    steps = events_of(run_dir, "step")
    assert [s.step for s in steps] == [1, 2] and [s.grad_norm for s in steps] == [0.0, 0.0]


def _rank_of_two(rank: int, port: int, runs_dir: str) -> None:
    """One of two gloo ranks of a GRPO run started in this test's own processes (torchrun's workers could not hold
    the plug-in reward): rank 1's completions differ in reward, rank 0's never do."""
    import os

    import torch

    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    from workbench import train
    from workbench.rewards import register_reward

    register_reward(
        "rank1_only",
        lambda example, completion, verdict: (
            float(len(completion) + sum(map(ord, completion)) % 7) if torch.distributed.get_rank() == 1 else 0.0
        ),
    )
    cfg = make_config(
        runs_dir,
        **{
            "training.method": "grpo",
            "data.train": str(SAMPLES / "phone_actions_reasoning" / "train.jsonl"),
            "data.max_length": 256,
            "schedule.max_steps": 2,
            "schedule.micro_batch_size": 1,
            "rl.group_size": 4,
            "rl.max_new_tokens": 8,
            "rl.max_draws": 3,
            "rl.rewards": {"rank1_only": 1.0},
            "sharding.strategy": "ddp",
            "sharding.nproc_per_node": 2,
            "output.run_name": "ddp-one-rank",
        },
    )
    train(cfg)


@pytest.mark.slow  # ~40 s: two processes
def test_grpo_draws_again_until_both_ranks_together_hold_their_groups_with_a_spread(tmp_path):
    """rl.max_draws under DDP with a spread on one rank only: rank 1 holds one group with a spread per draw, rank 0
    none, and 2 ranks x micro_batch_size 1 want 2; together they hold 2 after the second draw, so BOTH draw exactly
    twice per micro-batch (4 a step: grad_accum_steps 2), rank 0 trains its last draw at advantage 0 and rank 1's
    groups move the shared gradient. A rank deciding alone would draw 3 times on rank 0 (its own 0 < 1) and once on
    rank 1."""
    import time

    import torch.multiprocessing as mp

    from workbench.distributed.context import free_port

    procs = mp.start_processes(
        _rank_of_two, args=(free_port(), str(tmp_path / "runs")), nprocs=2, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + 300
    while not procs.join(timeout=5):
        if time.monotonic() > deadline:  # ranks out of step wait in a collective: never hang the suite
            for p in procs.processes:
                p.kill()
            pytest.fail("the two ranks did not finish within 300 s (a rank waiting in a collective the other skipped)")
    run_dir = tmp_path / "runs" / "ddp-one-rank"
    rollouts = events_of(run_dir, "rollout")
    assert [(r.step, r.draws, r.trained_groups, r.all_equal_groups) for r in rollouts] == [
        (1, 4, 0, 1.0),
        (2, 4, 0, 1.0),
    ]  # rank 0's event: its own groups, the draws both ranks took
    assert all(s.grad_norm > 0 for s in events_of(run_dir, "step"))  # rank 1's advantages reached the gradient
