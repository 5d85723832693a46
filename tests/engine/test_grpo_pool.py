"""The task pool and the step credit in a GRPO run: tiny GLM-4 on the offline phone's tasks shown as text, every
episode really played. An untrained model never succeeds, so the scorer here grants success to the first reply it
sees and then to that reply alone (what a model that found the answer once would do): the pool keeps it, replays it
into a later group that failed, the replayed row is trained as on-policy, and the pool's state survives a resume."""

from __future__ import annotations

import pytest
import torch

from workbench.engine.run import run_engine
from workbench.events import iter_events
from workbench.rewards.phone_tasks import PhoneTasksScorer


class FirstReplyWins(PhoneTasksScorer):
    """Real episodes; success for the first completion ever scored and for any later completion with its text."""

    winner = None

    def add_to_verdicts(self, prompts, completions, verdicts):
        super().add_to_verdicts(prompts, completions, verdicts)
        if FirstReplyWins.winner is None:
            FirstReplyWins.winner = completions[0]
        for completion, verdict in zip(completions, verdicts):
            verdict["episode"].success = completion == FirstReplyWins.winner


def pool_run(make_cfg, name: str, winner=None, **overrides):
    FirstReplyWins.winner = winner
    cfg = make_cfg(
        **{
            "training.method": "grpo",
            "data.max_length": 1024,
            "schedule.micro_batch_size": 1,
            "schedule.max_steps": 4,
            "rl.prompts": "phone_tasks",
            "rl.observation": "ui_tree",
            "rl.tasks": "open_app/settings",
            "rl.screen_size": "112x252",
            "rl.date": "2026-12-01",
            "rl.group_size": 3,
            "rl.max_new_tokens": 8,
            "rl.episode_max_steps": 2,
            "rl.rewards": {"episode_success": 1.0},
            "rl.pool": True,
            "rl.pool_replay": True,
            "rl.step_advantage_weight": 0.5,
            "checkpointing.every_steps": 2,
            "checkpointing.keep_last": 5,
            "output.run_name": name,
            **overrides,
        }
    )
    result = run_engine(cfg, scorer=FirstReplyWins.from_config(cfg))
    events = list(iter_events(result.run_dir / "events.jsonl"))
    return result, {
        kind: [e for e in events if getattr(e, "type", None) == kind] for kind in ("rollout", "step", "policy_mismatch")
    }


def test_the_pool_replays_a_kept_success_into_a_group_that_failed_follows_the_successes_and_resumes(
    make_cfg, monkeypatch
):
    from workbench.engine import grpo as grpo_module

    ratios = []  # per step, the PPO ratio of the group's last row on its tokens (the row a replay takes)
    loss_sum = grpo_module.grpo_loss_sum

    def recorded(logp, old, advantages, mask, *args, **kwargs):
        ratios.append(torch.exp(logp.detach() - old)[-1][mask[-1] > 0])
        return loss_sum(logp, old, advantages, mask, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(grpo_module, "grpo_loss_sum", recorded)
        whole_run, ev = pool_run(make_cfg, "pool")
    rollouts, steps, mismatch = ev["rollout"], ev["step"], ev["policy_mismatch"]
    first = rollouts[0].task_pool
    # step 1: the first reply won (1 of 3 episodes), so it was kept; its group had a spread: nothing replayed
    assert first["families"]["open_app"] == {
        "success": pytest.approx(1 / 3),
        "weight": pytest.approx(0.1 + 0.9 * 2 / 3, abs=1e-4),
        "drawn": 1,
    }
    assert (first["replayed"], first["kept"]) == (0, 1)
    later = rollouts[1:]
    assert all(r.task_pool["replayed"] == 1 for r in later)  # no sample repeats the winner: each group is replayed
    assert all(r.all_equal_groups == 0.0 for r in later)  # ... and so has a spread (the replayed reply wins again)
    for ro, st, m in zip(later, steps[1:], mismatch[1:]):
        # the replayed row is trained (in the step's tokens) but no sampler drew it: not in the mismatch
        assert m.tokens < st.tokens == round(ro.completion_tokens_mean * 3)
    # ... and it is trained as on-policy: its old log-probabilities are the trainer's own, its PPO ratio 1 on every
    # token (not the ratio to the sampler's log-probabilities of the completion it replaced)
    assert len(ratios) == 4 and all(len(r) and bool((r == 1.0).all()) for r in ratios[1:]), ratios
    # the pool follows the agent's own episodes: the replayed wins do not count, open_app's success falls
    assert [r.task_pool["families"]["open_app"]["success"] for r in rollouts] == pytest.approx(
        [1 / 3, 1 / 6, 1 / 9, 1 / 12]
    )
    # step credit: the group's three sampled replies share the task's first screen, one anchor group a step
    assert all(r.anchors["anchor_groups"] == 1 and r.anchors["mean_size"] >= 3 for r in rollouts)
    # the kept replies and the recent outcomes ride in the checkpoint: resumed at step 2, steps 3 and 4 replay the
    # same reply and report the same pool (without them: nothing to replay, success 0)
    step2 = next(p for p in (whole_run.run_dir / "checkpoints").iterdir() if p.name.endswith("0000002"))
    _, resumed = pool_run(
        make_cfg, "resumed", winner=FirstReplyWins.winner, **{"checkpointing.resume_from": str(step2)}
    )
    assert [r.task_pool for r in resumed["rollout"]] == [r.task_pool for r in rollouts[2:]]
    assert [s.loss for s in resumed["step"]] == [s.loss for s in steps[2:]]


def test_step_credit_adds_the_step_advantage_to_the_winners_advantage(make_cfg):
    """rl.step_advantage_weight 0.5, one step (three replies, the first one winning): the samples table's advantage of
    the winning reply is its episode advantage (one win in a group of 3) plus half its step advantage in its anchor
    group, which is positive (its return is the group's highest): more than the episode's alone."""
    import torch

    from workbench.engine.grpo_loss import group_advantages

    _, ev = pool_run(make_cfg, "credit", **{"schedule.max_steps": 1, "rl.pool": False, "rl.pool_replay": False})
    rollout = ev["rollout"][0]
    winner = rollout.samples[0]
    assert winner["rewards"] == {"episode_success": 1.0} and rollout.anchors["with_spread"] >= 1
    episode = float(group_advantages(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), 3, scale=True)[0])
    assert winner["advantage"] > episode + 0.1
