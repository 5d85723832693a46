"""Recipe files: every packaged one validates as a run configuration; a broken one is reported whole, each problem
with its field path; requirements say what a machine lacks; a partial config layers over another key by key."""

import pytest

from workbench.config import ConfigError, RunConfig, merge_config
from workbench.config import recipes as recipes_module
from workbench.config.recipes import Requirements, all_recipes, load_recipe, recipe_names

GiB = 1024**3


def test_every_packaged_recipe_is_a_valid_run_configuration():
    names = recipe_names()
    assert {"identity-demo", "phone-actions-smollm2", "precision-lab", "autoglm-phone-9b-lora-2x4090"} <= set(names)
    for recipe in all_recipes():
        # every check, files included; a recipe that starts from another's model gets a stand-in of that model
        cfg = recipe.run_config({"model.source": "tiny-glm4v-agent"} if recipe.starts_from else {})
        assert isinstance(cfg, RunConfig) and recipe.purpose
        if recipe.measured_figures:  # measured figures say where they were measured and what the bench took there
            assert recipe.measured_on is not None and recipe.measured_on.wall_s and recipe.measured_on.cpu_s, (
                recipe.name
            )


def test_settings_read_numbers_as_the_schema_does_and_keep_paths_as_written():
    recipe = load_recipe("phone-actions-smollm2")
    settings = recipe.settings()
    assert settings["schedule"]["learning_rate"] == 0.001 and isinstance(settings["schedule"]["learning_rate"], float)
    assert settings["data"]["train"] == "data_samples/phone_actions_reasoning/train.jsonl"
    assert recipe.run_config({"schedule.max_steps": 5}).schedule.max_steps == 5  # overrides win


def test_a_broken_recipe_reports_every_problem_at_once(tmp_path, monkeypatch):
    (tmp_path / "broken.yaml").write_text(
        "purpose: ''\n"
        "config: {lora: {r: 0}, schedule: {max_step: 3}}\n"
        "evaluation: [{task: nope, rows: 0, figures: {parse_rate: {value: 0.5, tolerance: -1}}}]\n"
        "requirements: {gpus: -1}\n"
        "surprise: 1\n"
    )
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    with pytest.raises(ConfigError) as err:
        load_recipe("broken")
    paths = {p for p, _ in err.value.problems}
    assert {
        "purpose",
        "evaluation[0].rows",
        "evaluation[0].figures.parse_rate.tolerance",
        "requirements.gpus",
        "surprise",
        "config.lora.r",
        "config.schedule.max_step",
    } <= paths, err.value.problems
    assert str(tmp_path / "broken.yaml") in str(err.value)


def test_figures_need_a_machine_class_and_tasks_must_exist(tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text(
        "purpose: p\nconfig: {}\nevaluation: [{task: nope, figures: {x: {value: 1, tolerance: 0}}}]\n"
    )
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    with pytest.raises(ConfigError) as err:
        load_recipe("r")
    problems = dict(err.value.problems)
    assert "unknown task 'nope'" in problems["evaluation[0].task"]
    assert "measured_on" in problems


def test_a_recipe_starting_from_another_is_checked_and_needs_that_model(tmp_path, monkeypatch):
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    (tmp_path / "sft.yaml").write_text("purpose: p\nconfig: {lora: {enabled: false}}\n")
    (tmp_path / "sft-lora.yaml").write_text("purpose: p\nconfig: {}\n")  # an adapter only: nothing to start from
    (tmp_path / "rl.yaml").write_text(
        "purpose: p\nstarts_from: sft\nconfig: {training: {method: grpo}, lora: {dropout: 0}}\n"
    )
    (tmp_path / "chain.yaml").write_text("purpose: p\nstarts_from: rl\nconfig: {}\n")
    for name, start, extra, field, says in [
        ("bad1", "nope", "", "starts_from", "unknown recipe 'nope'"),
        ("bad2", "sft-lora", "", "starts_from", "merge_adapter"),
        ("bad3", "sft", "model: {source: tiny-glm4}", "config.model.source", "set by starts_from"),
        ("bad4", "bad4", "", "starts_from", "itself"),
    ]:
        (tmp_path / f"{name}.yaml").write_text(f"purpose: p\nstarts_from: {start}\nconfig: {{{extra}}}\n")
        with pytest.raises(ConfigError) as err:
            load_recipe(name)
        assert says in dict(err.value.problems)[field], (name, err.value.problems)
    with pytest.raises(ConfigError, match="recipe rl starts from sft itself"):
        load_recipe("chain")
    rl = load_recipe("rl")
    with pytest.raises(ConfigError) as err:  # the start's model is not known until it is trained
        rl.run_config()
    assert "workbench train --recipe sft" in dict(err.value.problems)["model.source"]
    assert rl.run_config({"model.source": "tiny-glm4"}).training.method == "grpo"


def test_baselines_that_play_the_rl_tasks_need_them_and_their_settings_are_checked(tmp_path, monkeypatch):
    """The baselines that play the start on the RL tasks (filtered BC, DAgger, DPO, DAgger + DPO) need
    rl.prompts phone_tasks; SFT continued does not; baseline_settings are held to their bounds."""
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    (tmp_path / "sft.yaml").write_text("purpose: p\nconfig: {lora: {enabled: false}}\n")
    rl = "purpose: p\nstarts_from: sft\nconfig: {training: {method: grpo}, lora: {dropout: 0}%s}\n"
    (tmp_path / "rows.yaml").write_text(rl % "" + "baselines: [sft_continued, dagger, dpo]\n")
    with pytest.raises(ConfigError) as err:
        load_recipe("rows")
    assert "dagger, dpo: the start plays the RL tasks" in dict(err.value.problems)["baselines"]
    (tmp_path / "tasks.yaml").write_text(
        rl % ", rl: {prompts: phone_tasks}"
        + "baselines: [sft_continued, filtered_bc, dagger, dpo, dagger_dpo]\n"
        + "baseline_settings: {dagger_rounds: 2, dagger_label_share: 0.25}\n"
    )
    settings = load_recipe("tasks").baseline_settings
    assert (settings.dagger_rounds, settings.dagger_label_share, settings.dpo_learning_rate) == (2, 0.25, 1e-5)
    (tmp_path / "share.yaml").write_text(
        rl % ", rl: {prompts: phone_tasks}" + "baselines: [dagger]\nbaseline_settings: {dagger_label_share: 1}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_recipe("share")
    assert "baseline_settings.dagger_label_share" in dict(err.value.problems)


def test_an_unknown_recipe_names_the_known_ones():
    with pytest.raises(ConfigError) as err:
        load_recipe("nope")
    assert "unknown recipe 'nope'" in str(err.value) and "identity-demo" in str(err.value)


def test_requirements_say_what_the_machine_lacks():
    req = Requirements(gpus=2, gpu_memory_gib=23, host_memory_gib=32)
    assert req.unmet([], 24 * GiB) == (
        "needs 2 CUDA GPUs with >= 23 GiB each and >= 32 GiB host RAM; this machine has no CUDA GPU and 24 GiB host RAM"
    )
    assert "GPUs of 15.9, 15.9 GiB" in req.unmet([int(15.9 * GiB)] * 2, 64 * GiB)
    assert req.unmet([24564 * 2**20] * 2, 64 * GiB) is None  # two RTX 4090s
    assert Requirements().unmet([], 1) is None and Requirements().describe() == "a CPU (no GPU needed)"


def test_merge_config_layers_a_file_over_a_recipe_key_by_key():
    base = {"schedule": {"max_steps": 60, "learning_rate": 1e-3}, "data": {"train": "a.jsonl"}}
    merged = merge_config(base, {"schedule": {"max_steps": 5}, "lora": {"r": 8}})
    assert merged == {
        "schedule": {"max_steps": 5, "learning_rate": 1e-3},
        "data": {"train": "a.jsonl"},
        "lora": {"r": 8},
    }
    assert base["schedule"]["max_steps"] == 60  # a copy


@pytest.mark.parametrize(
    "lora,params,expected",
    [(True, 135_000_000, 1e-3), (True, 9_000_000_000, 2e-4), (False, 135_000_000, 5e-5), (False, 9_000_000_000, 1e-5)],
)
def test_a_null_learning_rate_is_derived_from_the_model_size(lora, params, expected):
    schedule = RunConfig().schedule
    assert schedule.learning_rate is None
    assert schedule.derived_learning_rate(lora, params) == expected
    assert schedule.model_copy(update={"learning_rate": 3e-3}).derived_learning_rate(lora, params) == 3e-3


def test_one_task_scored_on_two_sets_is_told_apart_by_its_file():
    screens = load_recipe("screenshots-to-actions-tiny-glm4v")
    assert [e.label for e in screens.evaluation] == ["phone_episodes", "phone_episodes (combos)"]
    assert screens.evaluation[1].data.endswith("phone_episodes/combos.jsonl")


def test_a_figure_that_claims_a_move_must_not_pass_when_nothing_moved(tmp_path, monkeypatch):
    """Issue 31: the GRPO recipe's windows all held its start's figures, so a run that changed nothing passed. A figure
    with a base is a claimed move: its window must exclude the base, unless the recipe says it stays unchanged."""
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    measured = "measured_on: {device: cpu, precision: fp32, description: d}\n"
    (tmp_path / "still.yaml").write_text(
        "purpose: p\nconfig: {}\n" + measured + "evaluation: [{task: identity, figures: {"
        "identity_rate: {value: 0.6, tolerance: 0.1, base: 0.55}}}]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_recipe("still")
    assert "a run that changes nothing would pass" in dict(err.value.problems)["evaluation[0].figures.identity_rate"]
    (tmp_path / "said.yaml").write_text(
        "purpose: p\nconfig: {}\n" + measured + "evaluation: [{task: identity, figures: {"
        "identity_rate: {value: 0.6, tolerance: 0.1, base: 0.55, unchanged: true}, "
        "loop_rate: {value: 0.6, tolerance: 0.1, base: 0.4}}}]\n"
    )
    assert load_recipe("said").evaluation[0].figures["identity_rate"].unchanged


def test_a_base_on_the_windows_edge_is_inside_it_so_a_claimed_move_refuses_it():
    """The window is closed (the judge accepts a figure on its edge, up to float rounding), so a claimed move's base on
    the edge would let a run that changed nothing pass: refused. Just outside the edge, and the judge fails a run that
    measured its base."""
    from workbench.bench.recipes import judge
    from workbench.config.recipes import EDGE, Figure

    for base in (0.25, 0.75, 0.25 - EDGE / 2, 0.75 + EDGE / 2):  # (the last two: as the judge rounds)
        with pytest.raises(ValueError, match="holds the base figure"):
            Figure(value=0.5, tolerance=0.25, base=base)
    assert Figure(value=0.5, tolerance=0.25, base=0.25, unchanged=True).base == 0.25  # said so: allowed
    for base in (0.2499, 0.7501, 0.0):
        figure = Figure(value=0.5, tolerance=0.25, base=base)
        assert judge(base, base, figure) == "OUTSIDE"  # nothing moved: the fine-tuned figure is the base's
        assert judge(0.5, base, figure) == "ok" and judge(0.25, base, figure) == "ok"  # the edge is inside


def test_a_figure_is_a_measured_value_with_its_tolerance_or_a_goal_over_the_base(tmp_path, monkeypatch):
    """A goal (above_base_by) needs no measurement, so no measured_on; a value needs its tolerance; a base figure is
    checked within a value's tolerance, so a goal alone cannot carry one."""
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    (tmp_path / "goal.yaml").write_text(
        "purpose: p\nconfig: {}\nevaluation: [{task: identity, figures: {identity_rate: {above_base_by: 0.1}}}]\n"
    )
    goal = load_recipe("goal")
    assert goal.figures == 1 and goal.measured_figures == 0 and goal.measured_on is None
    assert goal.summary() == "identity: identity_rate > base + 0.1"
    (tmp_path / "bad.yaml").write_text(
        "purpose: p\nconfig: {}\nevaluation: [{task: identity, figures: {"
        "a: {}, b: {value: 0.5}, c: {above_base_by: 0.1, base: 0.2}}}]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_recipe("bad")
    problems = dict(err.value.problems)
    assert "give value and tolerance (a measured figure) or above_base_by" in problems["evaluation[0].figures.a"]
    assert "needs a tolerance" in problems["evaluation[0].figures.b"]
    assert "give value and tolerance too, or drop base" in problems["evaluation[0].figures.c"]


def test_a_variant_layers_its_config_over_its_recipe_and_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(recipes_module, "RECIPES_DIR", tmp_path)
    (tmp_path / "full.yaml").write_text(
        "purpose: p\nconfig: {schedule: {max_steps: 400, learning_rate: 1.0e-4}, lora: {enabled: false}}\n"
    )
    (tmp_path / "short.yaml").write_text("purpose: p\nvariant_of: full\nconfig: {schedule: {max_steps: 80}}\n")
    short = load_recipe("short")
    # its own value wins, the rest of the section and the other sections come from the recipe it varies
    assert short.settings() == {"schedule": {"max_steps": 80, "learning_rate": 1e-4}, "lora": {"enabled": False}}
    cfg = short.run_config()
    assert (cfg.schedule.max_steps, cfg.schedule.learning_rate, cfg.lora.enabled) == (80, 1e-4, False)
    (tmp_path / "rl.yaml").write_text(
        "purpose: p\nstarts_from: short\nconfig: {training: {method: grpo}, lora: {dropout: 0}}\n"
    )
    assert load_recipe("rl").starts_from == "short"  # a variant's merged config saves a whole model to start from
    for name, base, says in [
        ("bad1", "nope", "unknown recipe 'nope'"),
        ("bad2", "bad2", "itself"),
        ("bad3", "short", "recipe short is a variant itself"),
    ]:
        (tmp_path / f"{name}.yaml").write_text(f"purpose: p\nvariant_of: {base}\nconfig: {{}}\n")
        with pytest.raises(ConfigError) as err:
            load_recipe(name)
        assert says in dict(err.value.problems)["variant_of"], (name, err.value.problems)
