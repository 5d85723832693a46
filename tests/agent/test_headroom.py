"""pass@1 against pass@k per task (``agent.headroom``, ``workbench agent headroom``): the unbiased estimator, the count
per task from k sampled runs (sharpenable: finished sometimes; never; always), samples that repeat for a seed, and
an in-process model's sampled replies at a temperature."""

from __future__ import annotations

import json

import pytest
import torch

from workbench.agent import OraclePolicy, run_episodes, sim_devices
from workbench.agent.headroom import format_headroom, measure_headroom, pass_at_k, summarize_headroom, task_headroom
from workbench.phone.tasks import select_tasks
from workbench.serve.remote import ModelReply

SIZE = (112, 252)


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(8, 0, 8) == 0.0 and pass_at_k(8, 1, 8) == 1.0 and pass_at_k(8, 8, 1) == 1.0
    assert pass_at_k(8, 1, 1) == 0.125 and pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 8)


class Coin:
    """Each episode the oracle's replies or a false finish, drawn at its first step from torch's generator (``p``: the
    oracle's chance)."""

    name = "coin"

    def __init__(self, tasks, p: float):
        self.oracle, self.p, self.decided = OraclePolicy(tasks), p, {}

    def __call__(self, conversations):
        out = []
        for messages in conversations:
            key = id(messages)
            if key not in self.decided:  # one draw an episode, at its first step
                self.decided[key] = bool(torch.rand(()) < self.p)
            out.append(self.oracle([messages])[0] if self.decided[key] else ModelReply('finish(message="done")'))
        return out


def test_per_task_counts_from_k_runs_say_what_rl_can_sharpen():
    tasks = select_tasks("open_app")[:3]
    runs = [
        run_episodes(tasks, policy, sim_devices(SIZE))
        for policy in (OraclePolicy(tasks), Coin(tasks, 0.0), Coin(tasks, 0.0), Coin(tasks, 0.0))
    ]
    runs[1][1] = runs[0][1]  # every task won in the first run; task 1 in the second too
    rows = task_headroom(runs, greedy=runs[0])
    assert [(r.successes, r.pass_1, r.pass_k, r.sharpenable) for r in rows] == [
        (1, 0.25, 1.0, True),
        (2, 0.5, 1.0, True),
        (1, 0.25, 1.0, True),
    ]
    runs[0][2] = runs[1][2]  # task 2 now never won
    rows = task_headroom(runs, greedy=runs[0])
    summary = summarize_headroom(rows)
    assert (rows[2].successes, rows[2].pass_k, rows[2].sharpenable) == (0, 0.0, False)
    assert summary == {
        "tasks": 3,
        "k": 4,
        "greedy_success": 2 / 3,
        "pass_1": pytest.approx((0.25 + 0.5) / 3),
        "pass_k": pytest.approx(2 / 3),
        "sharpenable": 2,
        "never": 1,
        "always": 0,
    }
    table = format_headroom(rows, summary)
    assert "pass@4" in table and "RL can sharpen 2" in table and "1 never finished in 4 samples" in table
    with pytest.raises(ValueError, match="same tasks"):
        task_headroom([runs[0], runs[1][::-1]])


def test_samples_repeat_for_a_seed_and_are_stored(tmp_path):
    tasks = select_tasks("open_app")[:4]
    settings = {"tasks": "open_app"}

    def measured(folder):
        return measure_headroom(
            tasks,
            lambda t: Coin(tasks, 0.5 if t > 0 else 1.0),
            3,
            folder,
            sim_devices(SIZE),
            settings,
            seed=7,
            progress=False,
        )

    rows, summary = measured(tmp_path / "a")
    again, _ = measured(tmp_path / "b")
    assert [r.successes for r in rows] == [r.successes for r in again]
    assert summary["greedy_success"] == 1.0 and 0 < summary["pass_1"] < 1
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["greedy", "sample-1", "sample-2", "sample-3"]
    stored = json.loads((tmp_path / "a" / "sample-2" / "summary.json").read_text())
    assert stored["settings"]["seed"] == 8 and stored["settings"]["temperature"] == 1.0


def test_an_in_process_model_samples_at_a_temperature_and_repeats_for_a_seed():
    from workbench.agent import InProcessPolicy
    from workbench.models import load_for_inference

    loaded = load_for_inference("tiny-glm4")
    conversations = [[{"role": "user", "content": "Open Settings"}]] * 2
    policy = InProcessPolicy(loaded.model, loaded.tokenizer, max_tokens=12, temperature=1.0, batch_size=1)
    torch.manual_seed(0)
    first = [r.content for r in policy(conversations)]
    torch.manual_seed(0)
    assert [r.content for r in policy(conversations)] == first
    torch.manual_seed(1)
    assert [r.content for r in policy(conversations)] != first
    greedy = InProcessPolicy(loaded.model, loaded.tokenizer, max_tokens=12)
    assert greedy(conversations)[0].content == greedy(conversations)[1].content
