"""The baselines that learn from the start's own mistakes (``bench.baselines``: dagger, dpo, dagger_dpo): each trains
for real from a tiny whole-model start within the recipe's wall time (a clock the test moves: the start's playing
costs PLAY_S, a training step STEP_S), the start playing the RL tasks once for all of them as a policy whose mistakes
are known (a loop, a false finish, detours); then every model on the same episodes, one table with each one's loop and
false-finish rates. And the arithmetic that shares the time (``dagger.TimeBudget``, ``dpo_steps``)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.config.loading import save_config
from workbench.config.recipes import load_recipe
from workbench.phone.screen import parse_size
from workbench.phone.tasks import select_tasks
from workbench.runs.layout import CONFIG_FILE, run_config

TASKS = "toggle_setting/wifi-off,open_app/settings"
TASKS_SET = "open_app/settings"  # the run's rl.tasks changed by --set
STEP_S, PLAY_S, WALL_S = 10.0, 20.0, 120.0


class Scripted:
    """A policy whose mistakes are known: ``mistaken`` says finish at once on open_app tasks (a false finish) and
    elsewhere launches Gmail, taps nothing twice on its screen (the second a loop) and hands over to the expert;
    ``stuck`` launches Gmail and taps nothing until the repeat rule ends the episode; ``finisher`` says finish at once;
    ``expert`` follows a shortest path."""

    def __init__(self, name: str, how: str, clock=None):
        from workbench.agent import ExpertPolicy
        from workbench.phone.tasks import select_tasks

        self.name, self.how = name, how
        self.expert = ExpertPolicy(select_tasks(TASKS))
        if clock is not None:  # loading and playing it costs PLAY_S of the baselines' clock
            clock[0] += PLAY_S

    def __call__(self, conversations):
        from workbench.phone.conversation import assistant_target
        from workbench.serve.remote import ModelReply

        out = []
        for messages in conversations:
            done = sum(m["role"] == "assistant" for m in messages)
            task = self.expert.phone(messages)[0]
            finish = self.how == "finisher" or (self.how == "mistaken" and task.template == "open_app")
            if finish:
                action = 'finish(message="Done.")'
            elif self.how == "expert" or (self.how == "mistaken" and done >= 3):
                out.append(self.expert([messages])[0])
                continue
            else:
                action = 'do(action="Launch", app="Gmail")' if done == 0 else 'do(action="Tap", element=[500,990])'
            out.append(ModelReply(assistant_target("Hm.", action)))
        return out


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def bench_setup(monkeypatch, tmp_path, agent_rows, agent_start_run):
    """The recipe with the three baselines, its RL tasks two, screenshots; its start recipe training the tiny
    agent on ``agent_rows`` in one process; the start run's fastest step STEP_S; a clock the test moves; the start
    (and DAgger's later rounds) played by the mistaken policy; every training real, each step moving the clock."""
    from workbench import dagger
    from workbench.agent import judging
    from workbench.bench import baselines as bl
    from workbench.config.recipes import Recipe
    from workbench.runs.layout import whole_model
    from workbench.training import train

    recipe = load_recipe("learn-from-mistakes-smollm2").model_copy(
        update={"baselines": ["dagger", "dpo", "dagger_dpo"]}
    )
    start = load_recipe(recipe.starts_from)
    layered = {
        recipe.name: {
            "rl.tasks": TASKS,
            "rl.observation": "screenshot",
            "rl.episode_max_steps": 6,
            "rl.max_new_tokens": 16,
        },
        start.name: {
            "sharding.strategy": "none",
            "sharding.nproc_per_node": 1,
            "precision.mode": "fp32",
            "data.train": str(agent_rows),
            "data.max_length": 1024,
            "schedule.micro_batch_size": 1,
            "schedule.grad_accum_steps": 1,
            "schedule.warmup_steps": 0,
        },
    }
    real_run_config = Recipe.run_config
    monkeypatch.setattr(
        Recipe,
        "run_config",
        lambda self, overrides=(), checks=True: real_run_config(
            self, {**layered.get(self.name, {}), **dict(overrides)}, checks=checks
        ),
    )
    clock, made = [0.0], []
    monkeypatch.setattr(bl, "time", SimpleNamespace(monotonic=lambda: clock[0], strftime=time.strftime))
    monkeypatch.setattr(bl, "fastest_step_s", lambda run: STEP_S)
    run_overhead_s = bl.run_overhead_s
    monkeypatch.setattr(bl, "run_overhead_s", lambda run: 0.0)  # a run costs its steps alone (here: the clock's)

    def mistaken(name, load, max_tokens):
        return lambda: made.append(name) or Scripted(name, "mistaken", clock)

    monkeypatch.setattr(judging, "in_process", mistaken)
    monkeypatch.setattr(dagger, "in_process", mistaken)
    trained = []

    def train_for_real(cfg):
        trained.append(cfg)
        clock[0] += cfg.schedule.max_steps * STEP_S * (2 if cfg.training.method == "dpo" else 1)
        return train(cfg).run_dir

    grpo_run = tmp_path / "runs" / "grpo"
    grpo_run.mkdir(parents=True)
    model = whole_model(agent_start_run)
    save_config(recipe.run_config({"model.source": str(model)}), grpo_run / CONFIG_FILE)  # as the recipe's run saved it
    return SimpleNamespace(
        recipe=recipe,
        start=start,
        start_run=agent_start_run,
        model=model,
        grpo_run=grpo_run,
        train=train_for_real,
        trained=trained,
        made=made,
        bl=bl,
        clock=clock,
        run_overhead_s=run_overhead_s,
    )


def test_dagger_dpo_and_dagger_dpo_train_from_the_start_in_its_wall_time_and_are_judged_with_their_loops(
    bench_setup, monkeypatch, capsys
):
    s = bench_setup
    out = s.bl.train_baselines(s.recipe, s.start, s.start_run, s.model, WALL_S, s.grpo_run, s.train, False)
    assert [(b.role, b.run_dir is not None) for b in out] == [("dagger", True), ("dpo", True), ("dagger_dpo", True)]
    assert s.made.count("start") == 1  # the start played the RL tasks once for all three
    dagger, dpo, dagger_dpo = out

    def runs_in(folder):
        return [c for c in s.trained if c.output.runs_dir == str(folder)]

    # DAgger, 120 s: the start's playing (20 s) charged; round 1 shares the 100 s left among 3 rounds (20 s of
    # training each, as long as a round plays): 2 steps; round 2 (20 s more playing) 2 of 2 rounds; round 3 the rest
    rounds = runs_in(s.grpo_run / "dagger")
    assert [c.schedule.max_steps for c in rounds] == [2, 2, 2] and dagger.steps == 6
    assert dagger.run_dir == s.grpo_run / "dagger" / "round-3" and dagger.train_s == WALL_S
    assert rounds[1].model.source == str(s.grpo_run / "dagger" / "round-1" / "model")  # from where round 1 left it
    assert s.made == ["start", "round-2", "round-3"]  # later rounds play the last round's model
    labels = _rows(s.grpo_run / "dagger" / "round-1" / "labels" / "labels.jsonl")
    times = round(12 / len(labels))  # the labels repeated to about half of what round 1 trains on
    assert times > 1 and len(_rows(rounds[0].data.train)) == 12 + times * len(labels)
    assert "3 DAgger round(s) of 2 + 2 + 2 steps" in dagger.note

    # DPO: 100 s after the playing; 4 pairs (the loop, the false finish, two detours) cost a 26.7 s reference pass:
    # 3 steps of one pair, so 3 of the 4 pairs, the loop and the false finish first
    [dpo_cfg] = runs_in(s.grpo_run.parent)[:1]
    assert dpo_cfg.training.method == "dpo" and dpo_cfg.model.source == str(s.model)
    assert dpo_cfg.schedule.learning_rate == s.recipe.baseline_settings.dpo_learning_rate
    assert dpo.steps == dpo_cfg.schedule.max_steps == 3 and dpo.run_dir.name == dpo_cfg.output.run_name
    pairs = _rows(dpo_cfg.data.train)
    assert [p["meta"]["kind"] for p in pairs] == ["loop", "false_finish", "other"]
    assert "DPO for 3 steps on 3 of 4 pairs" in dpo.note and "loop 1, false_finish 1, other 2" in dpo.note
    parts = [p for m in pairs[0]["prompt"] if isinstance(m["content"], list) for p in m["content"]]
    images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert images and (Path(dpo_cfg.data.train).parent / images[-1]).is_file()  # found from the pairs' new folder

    # DAgger + DPO: DAgger within (120 + 20) / 2 = 70 s: one round of the 50 s left (a second would train less than
    # it plays), 5 steps; then DPO from its model for the 50 s left: 1 step, on the loop
    assert [c.schedule.max_steps for c in runs_in(s.grpo_run / "dagger_dpo")] == [5]
    dpo_part = runs_in(s.grpo_run.parent)[1]
    assert dpo_part.training.method == "dpo" and dpo_part.schedule.max_steps == 1
    assert dpo_part.model.source == str(s.grpo_run / "dagger_dpo" / "round-1" / "model")
    assert [p["meta"]["kind"] for p in _rows(dpo_part.data.train)] == ["loop"] and dagger_dpo.steps == 6
    assert dagger_dpo.run_dir.name == dpo_part.output.run_name

    # every model on the same episodes: the start (stuck), the three baselines, the recipe's run (says finish at once)
    from workbench import models
    from workbench.agent import judging
    from workbench.bench import recipes as bench
    from workbench.config.recipes import Evaluation
    from workbench.runs import layout

    how = {"base": "stuck", "tuned": "finisher", "dagger": "expert", "dpo": "mistaken", "dagger_dpo": "expert"}
    monkeypatch.setattr(judging, "in_process", lambda name, load, max_tokens: lambda: Scripted(name, how[name]))
    monkeypatch.setattr(models, "load_run_for_inference", lambda run_dir, device: None)
    monkeypatch.setattr(layout, "base_model", lambda run_dir: "tiny-glm4")
    (s.grpo_run / "config.json").write_text(json.dumps({"model": {"source": "tiny-glm4"}}))
    evaluation = Evaluation(task="phone_agent", data=TASKS, max_tokens=16, max_steps=8, date="2026-12-01")
    comparisons = []
    bench.evaluate_episodes(evaluation, s.grpo_run, False, out, comparisons)
    lines = s.bl.comparison_lines(s.recipe.name, comparisons, out)
    table = "\n".join(lines)
    assert re.search(r"SFT start +0/2  - +1\.000 +0\.000\n", table), table  # stuck: every episode ends in a loop
    assert re.search(r"DAgger +2/2  2 / 0 \(p 0\.5\) +0\.000 +0\.000\n", table), table
    assert re.search(r"DPO +1/2  1 / 0 \(p 1\) +0\.000 +0\.500\n", table), table  # a false finish of two
    assert re.search(r"DAgger \+ DPO +2/2  2 / 0 \(p 0\.5\) +0\.000 +0\.000\n", table), table
    assert re.search(r"RL \(the recipe\) +0/2  0 / 0 \(p 1\) +0\.000 +1\.000\n", table), table
    assert "loops" in lines[1] and "false finishes" in lines[1]
    assert "DPO: 3 steps in " in table and "DAgger + DPO: 6 steps in " in table


def test_a_start_that_never_leaves_a_shortest_path_gives_dpo_no_pairs_and_it_says_so(bench_setup, monkeypatch):
    from workbench.agent import judging

    s = bench_setup
    monkeypatch.setattr(judging, "in_process", lambda name, load, max_tokens: lambda: Scripted(name, "expert"))
    recipe = s.recipe.model_copy(update={"baselines": ["dpo"]})
    [dpo] = s.bl.train_baselines(recipe, s.start, s.start_run, s.model, WALL_S, s.grpo_run, s.train, False)
    assert dpo.run_dir is None and not s.trained
    assert "no pairs" in dpo.note and "none off a shortest path" in dpo.note, dpo.note
    start_only = s.bl.Comparison(
        "tasks", [{"role": "base", "success": 2, "n": 2, "only": 0, "only_start": 0, "p": 1.0, **_no_rates()}]
    )
    assert f"  DPO: not trained ({dpo.note})" in s.bl.comparison_lines(recipe.name, [start_only], [dpo])


def _no_rates() -> dict:
    return {"loop_rate": 0.0, "false_finish_rate": 0.0}


def test_a_budget_plays_a_further_round_only_while_each_round_trains_as_long_as_it_plays():
    from workbench.dagger import TimeBudget

    clock = [0.0]
    budget = TimeBudget(120.0, 10.0, play_s=20.0, clock=lambda: clock[0], owed_s=20.0)  # the start's playing owed
    # 100 s left, 3 rounds: 20 s each beside two more playings of 20 s: as long as a round plays
    assert budget.round_steps(1, 3) == 2 and not budget.last
    clock[0] += 20 + 20  # round 1 trained, round 2 played
    assert budget.round_steps(2, 3) == 2 and not budget.last  # 60 s: 20 each, one playing to come
    clock[0] += 20 + 20
    assert budget.round_steps(3, 3) == 2 and budget.last  # 20 s: the last round
    short = TimeBudget(60.0, 10.0, play_s=20.0, clock=lambda: clock[0])
    clock[0] += 20  # 40 s left: a second round would train 10 s, less than its playing: this one takes all
    assert short.round_steps(1, 3) == 4 and short.last
    clock[0] += 35
    assert short.round_steps(1, 3) == 0  # 5 s left: not a step
    costly = TimeBudget(120.0, 10.0, play_s=20.0, run_s=5.0, clock=lambda: clock[0], owed_s=20.0)
    # 100 s left: 3 rounds would train 15 s each once a run's own 5 s are paid, less than a round plays; 2 rounds 35 s
    assert costly.round_steps(1, 3) == 3 and not costly.last


def test_dpo_steps_count_two_sft_steps_a_step_and_the_reference_pass():
    from workbench.bench.baselines import dpo_steps

    # 4 pairs a step at 10 s an SFT step of 4 rows: 20 s a DPO step; 12 pairs' reference pass 2 x 12 x 10 / 12 = 20 s
    assert dpo_steps(100.0, 10.0, 12, 4) == 4
    assert dpo_steps(19.0, 10.0, 0, 4) == 0


def test_the_starts_episodes_copied_from_a_run_beside_are_charged_the_playing_they_copy(bench_setup):
    """Two recipe runs beside each other from one start: the second copies the start's episodes of the RL tasks
    (the same replay key) and each of its baselines is charged the playing as recorded, not the copying's moments."""
    import json

    from workbench.agent.judging import PLAY_S

    s = bench_setup

    def start_point(run_dir):
        if not run_dir.exists():  # a second recipe run, its configuration saved as the first's
            shutil.copytree(s.grpo_run, run_dir)
        return s.bl.StartPoint(s.recipe, s.start, s.model, WALL_S, run_dir, s.train, False, STEP_S, "now")

    first, second = start_point(s.grpo_run), start_point(s.grpo_run.parent / "grpo-2")
    first.start_play(first.budget())
    budget = second.budget()
    played = second.start_play(budget)
    assert s.made == ["start"] and played.replayed_from == s.grpo_run / "episodes" / "rl-tasks-start"
    summary = json.loads((played.folder / "summary.json").read_text())
    assert summary[PLAY_S] > 0 and budget.owed_s == second.play_s == summary[PLAY_S]


def test_the_baselines_play_the_tasks_the_recipes_run_trained_on(bench_setup):
    """The RL tasks and how they are played come from the recipe's run as it saved its configuration (``--set``
    included), not from the recipe file."""
    s = bench_setup
    cfg = run_config(s.grpo_run)
    save_config(cfg.model_copy(update={"rl": cfg.rl.model_copy(update={"tasks": TASKS_SET})}), s.grpo_run / CONFIG_FILE)
    at = s.bl.StartPoint(s.recipe, s.start, s.model, WALL_S, s.grpo_run, s.train, False, STEP_S, "now")
    assert [t.id for t in at.tasks] == [t.id for t in select_tasks(TASKS_SET)] != [t.id for t in select_tasks(TASKS)]
    assert at.play["size"] == parse_size(cfg.rl.screen_size) and at.play["max_steps"] == cfg.rl.episode_max_steps


def test_a_training_runs_cost_besides_its_steps_comes_off_the_steps_planned_after_it(
    bench_setup, monkeypatch, tmp_path
):
    """The start run's time that no step took (building, tokenizing, saving) comes off SFT continued's steps; each
    run trained here then says what a run costs for the runs planned after it (DAgger's rounds)."""
    from workbench.events import EventWriter, Step

    s = bench_setup
    run = tmp_path / "start-run"
    run.mkdir()
    with EventWriter(run / "events.jsonl") as w:  # 50 s from first event to last, 30 s of it in steps
        for n, (at, took) in enumerate([(100.0, 10.0), (120.0, 8.0), (150.0, 12.0)], 1):
            w.emit(Step(n, 1.0, 1e-4, 1.0, None, False, 10, 1.0, took, 0.0, time=at))
    assert s.run_overhead_s(run) == 20.0
    monkeypatch.setattr(s.bl, "run_overhead_s", lambda run: 6.0)

    def train(cfg):  # each run costs 7 s besides its steps
        s.clock[0] += cfg.schedule.max_steps * STEP_S + 7.0
        return s.grpo_run

    recipe = s.recipe.model_copy(update={"baselines": ["sft_continued"]})
    [continued] = s.bl.train_baselines(recipe, s.start, s.start_run, s.model, WALL_S, s.grpo_run, train, False)
    assert continued.steps == 11  # (120 - 6) / 10, rounded
    at = s.bl.StartPoint(recipe, s.start, s.model, WALL_S, s.grpo_run, train, False, STEP_S, "now", run_s=6.0)
    budget = at.budget()
    at.train_sft(at.config("sft_continued", {"schedule.max_steps": 3}), budget)
    assert at.run_s == budget.run_s == 7.0
    assert budget.round_steps(1, 1) == 7  # 120 - 37 spent - a run's 7 s: 76 s, 7 steps
