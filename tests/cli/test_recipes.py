"""`workbench recipes` (list, show, copy) and `workbench train --recipe`: the recipe, then --config, then flags; a
recipe needing GPUs this machine lacks is refused, saying what it needs."""

import json

import yaml

from workbench.cli.main import main
from workbench.config import load_config
from workbench.config.recipes import load_recipe, recipe_names


def test_list_names_every_recipe_with_its_purpose_figures_and_needs(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    for name in recipe_names():
        recipe = load_recipe(name)
        assert (
            f"{name}\n  {recipe.purpose}\n  figures: {recipe.summary()}\n  needs: {recipe.requirements.describe()}"
            in out
        )
    assert main(["recipes", "list", "identity-demo"]) == 2  # a name given to list: did you mean show?
    assert "recipes show" in capsys.readouterr().err


def test_show_prints_the_file_and_its_command_line(capsys):
    assert main(["recipes", "show", "phone-actions-smollm2"]) == 0
    out = capsys.readouterr().out
    assert load_recipe("phone-actions-smollm2").path and "purpose:" in out and "# The phone-actions figures" in out
    assert "--schedule.learning_rate 0.001" in out and "workbench train --recipe phone-actions-smollm2" in out
    assert main(["recipes", "show"]) == 2 and "needs a recipe name" in capsys.readouterr().err
    assert main(["recipes", "show", "nope"]) == 2 and "unknown recipe 'nope'" in capsys.readouterr().err


def test_copy_writes_a_run_configuration_that_trains_as_the_recipe(capsys, tmp_path):
    target = tmp_path / "run.yaml"
    assert main(["recipes", "copy", "phone-actions-smollm2", str(target)]) == 0
    text = target.read_text()
    assert text.startswith("# From recipe phone-actions-smollm2:") and "python -m workbench.bench.recipes" in text
    assert yaml.safe_load(text) == load_recipe("phone-actions-smollm2").settings()
    assert load_config(target) == load_recipe("phone-actions-smollm2").run_config()
    assert main(["recipes", "copy", "phone-actions-smollm2", str(target)]) == 2  # never overwritten silently
    assert "--force" in capsys.readouterr().err
    assert main(["recipes", "copy", "phone-actions-smollm2", str(target), "--force"]) == 0


def test_train_recipe_then_config_then_flags(capsys, tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("schedule: {max_steps: 7}\nlora: {r: 4}\n")
    assert (
        main(["train", "--recipe", "phone-actions-smollm2", "--config", str(own), "--lora.r", "2", "--print-config"])
        == 0
    )
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["schedule"]["max_steps"] == 7  # the file over the recipe ...
    assert cfg["schedule"]["grad_accum_steps"] == 2 and cfg["schedule"]["learning_rate"] == 0.001  # ... key by key
    assert cfg["lora"]["r"] == 2  # and the flag over both
    assert cfg["data"]["train"].endswith("phone_actions_reasoning/train.jsonl")


def test_a_gpu_recipe_on_this_cpu_machine_says_what_it_needs(capsys, monkeypatch):
    import workbench.hardware as hardware

    monkeypatch.setattr(hardware, "machine_memory", lambda: ([], 64 * 1024**3))
    assert main(["train", "--recipe", "autoglm-phone-9b-lora-2x4090"]) == 2
    err = capsys.readouterr().err
    assert (
        "needs 2 CUDA GPUs with >= 23.8 GiB each and >= 32 GiB host RAM; this machine has no CUDA GPU" in err
        and "workbench plan --recipe autoglm-phone-9b-lora-2x4090" in err
        and "Traceback" not in err
    )
    assert main(["train", "--recipe", "autoglm-phone-9b-lora-2x4090", "--print-config"]) == 0  # looking is fine


def test_train_recipe_runs_it(capsys, tmp_path):
    """precision-lab (a tiny model) as the recipe says, shortened by a flag: its settings reach the run."""
    assert (
        main(
            [
                "train",
                "--recipe",
                "precision-lab",
                "--schedule.max_steps",
                "2",
                "--output.runs_dir",
                str(tmp_path),
                "--output.run_name",
                "lab",
                "--output.progress_bar",
                "false",
            ]
        )
        == 0
    )
    started = json.loads((tmp_path / "lab" / "events.jsonl").read_text().splitlines()[0])
    assert started["type"] == "run_started"
    assert (
        started["config"]["model"]["source"] == "tiny-glm4" and started["config"]["schedule"]["learning_rate"] == 0.003
    )
    assert started["config"]["schedule"]["max_steps"] == 2


def test_a_recipe_that_starts_from_another_asks_for_that_model(capsys):
    assert main(["train", "--recipe", "grpo-phone-tasks-tiny-glm4v"]) == 2
    err = capsys.readouterr().err
    assert (
        "model.source: recipe grpo-phone-tasks-tiny-glm4v starts from the model recipe "
        "screenshots-to-actions-tiny-glm4v trains"
        in err
        and "--model.source RUN/model" in err
    )
    assert main(["recipes", "show", "grpo-phone-tasks-tiny-glm4v"]) == 0
    assert "add --model.source RUN/model" in capsys.readouterr().out
