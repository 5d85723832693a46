"""The config panel's model without widgets: values, problems by field path, command line, files, DeepSpeed JSON."""

import json
import shlex
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, SAMPLES
from workbench.cli.main import _resolved, build_parser
from workbench.config import ConfigError, RunConfig, leaf_fields
from workbench.ui.config_form import ConfigForm, form_sections


def test_the_form_model_imports_no_widget_library():
    code = "import sys, workbench.ui.config_form; print(sorted({'ipywidgets', 'plotly'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_fields_come_from_the_schema():
    form = ConfigForm()
    assert list(form.fields) == [p for p, _ in leaf_fields(RunConfig)]
    assert [s for s, _ in form_sections()][:2] == ["model", "data"]
    assert form.fields["precision.mode"].kind == "choice" and "fp16" in form.fields["precision.mode"].choices
    assert (
        form.fields["lora.target_modules"].kind == "yaml" and "all-linear" in form.fields["lora.target_modules"].choices
    )
    assert form.fields["data.eval"].kind == "str" and form.fields["data.eval"].optional


def test_values_make_the_config_and_problems_go_to_their_fields():
    form = ConfigForm()
    assert form.set("lora.target_modules", "q_proj, v_proj").lora.target_modules == ["q_proj", "v_proj"]
    assert form.values["lora.target_modules"] == "q_proj, v_proj"  # held as the user typed it
    form.set("lora.target_modules", ["k_proj"])  # typed values are shown as a form would show them
    assert form.values["lora.target_modules"] == "[k_proj]" and form.config.lora.target_modules == ["k_proj"]

    assert form.set("lora.r", 0) is None
    form.set("schedule.warmup_steps", "500")
    form.set("lora.target_modules", "[q_proj")  # not even YAML: its own problem, the rest still validated
    assert "greater than or equal to 1" in form.field_problems("lora.r")[0]
    assert "exceeds max_steps" in form.field_problems("schedule.warmup_steps")[0]
    assert form.field_problems("lora.target_modules")[0].startswith("not a YAML value")
    assert form.field_problems("lora.alpha") == [] and len(form.problems) == 3
    form.update({"lora.r": 4, "schedule.warmup_steps": "", "lora.target_modules": "[q_proj]"})
    assert form.config is not None and form.problems == [] and form.config.lora.target_modules == ["q_proj"]
    with pytest.raises(KeyError, match="lora.rank"):
        form.set("lora.rank", 4)


def test_a_sub_path_problem_is_routed_to_the_field_that_owns_it():
    form = ConfigForm()
    form.set("precision.module_rules", "[{pattern: lm_head, dtipe: float32}]")
    assert form.config is None and form.problems[0][0] == "precision.module_rules[0].dtipe"
    assert form.field_problems("precision.module_rules") == ["[0].dtipe: " + form.problems[0][1]]
    assert form.other_problems == []


def test_listeners_hear_every_validation():
    form = ConfigForm()
    heard = []
    form.on_change(lambda f: heard.append(f.config is not None))
    form.set("lora.r", 0)
    form.set("lora.r", 8)
    assert heard == [False, True]


def test_the_command_line_reproduces_the_config():
    form = ConfigForm()
    form.update(
        {
            "lora.r": 8,
            "lora.target_modules": "[q_proj, v_proj]",
            "precision.mode": "bf16",
            "data.eval": "",
            "schedule.learning_rate": 0.001,
            "data.system_prompt": "You're 'PhoneMate'; be brief.",
        }
    )
    argv = shlex.split(form.cli_command.replace("\\\n", " "))
    assert argv[:2] == ["workbench", "train"] and "--lora.alpha" not in argv  # defaults are left out
    assert _resolved(build_parser().parse_args(argv[1:])) == form.config


def test_load_fills_missing_fields_with_defaults_and_names_a_bad_file(tmp_path):
    (tmp_path / "partial.yaml").write_text("lora: {alpha: 7}\nschedule: {max_steps: 9}\n")
    form = ConfigForm()
    form.set("lora.r", 12)
    cfg = form.load(tmp_path / "partial.yaml")
    assert cfg.lora.alpha == 7 and cfg.schedule.max_steps == 9 and cfg.lora.r == RunConfig().lora.r
    (tmp_path / "typed.yaml").write_text("lora: {r: abc}\n")
    assert form.load(tmp_path / "typed.yaml") is None and "valid integer" in form.field_problems("lora.r")[0]
    (tmp_path / "broken.yaml").write_text("lora: {r: [\n")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00\x01")
    (tmp_path / "list.yaml").write_text("- 1\n")
    for bad in ("missing.yaml", "broken.yaml", "binary.yaml", "list.yaml"):
        with pytest.raises(ConfigError, match=bad):
            form.load(tmp_path / bad)


def test_save_refuses_an_invalid_form_and_an_unwritable_path(tmp_path):
    form = ConfigForm()
    form.set("lora.r", 12)
    assert yaml.safe_load(form.save(tmp_path / "c.yaml").read_text())["lora"]["r"] == 12
    assert json.loads(form.save(tmp_path / "c.json").read_text())["lora"]["r"] == 12
    with pytest.raises(ConfigError, match="is a folder"):
        form.save(tmp_path)
    with pytest.raises(ConfigError, match="cannot write"):
        form.save(tmp_path / "no" / "such" / "dir" / "c.yaml")
    form.set("lora.r", -1)
    with pytest.raises(ConfigError, match="lora.r"):
        form.save(tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()


def test_deepspeed_json_is_imported_through_the_importer_with_its_warnings():
    form = ConfigForm()
    imported = form.import_deepspeed(SAMPLES / "deepspeed" / "seed000_ds_config.json")
    assert form.values["precision.mode"] == "fp16" and form.values["schedule.micro_batch_size"] == 4
    assert form.values["schedule.grad_accum_steps"] == 16 and form.values["sharding.deepspeed_stage"] == 3
    assert {k for k, _ in imported.warnings} >= {"fp16.loss_scale", "optimizer.params.fp16_optimizer_state"}


@pytest.mark.parametrize(
    "content, reason",
    [
        (None, "file not found"),
        ('{"fp16": {"enabled": true,}', "not valid JSON"),
        ("[1, 2]", "must hold a DeepSpeed configuration object, not list"),
        ('{"train_micro_batch_size_per_gpu": "four"}', "wrong type"),
    ],
)
def test_a_bad_deepspeed_json_is_named_and_changes_nothing(tmp_path, content, reason):
    path = tmp_path / "ds.json"
    if content is not None:
        path.write_text(content)
    form = ConfigForm()
    before = dict(form.values)
    with pytest.raises(ConfigError, match=reason) as err:
        form.import_deepspeed(path)
    assert "ds.json" in str(err.value) and form.values == before


def test_a_recipe_is_a_starting_point_that_keeps_where_runs_go(tmp_path):

    form = ConfigForm()
    form.set("output.runs_dir", str(tmp_path))
    form.set("lora.r", 4)  # an earlier edit the recipe does not name returns to its default
    recipe = form.start_from_recipe("phone-actions-smollm2")
    assert recipe.name == "phone-actions-smollm2" and form.problems == []
    expected = recipe.run_config({"output.runs_dir": str(tmp_path)})
    assert form.config == expected and form.config.lora.r == 16
    with pytest.raises(ConfigError, match="unknown recipe 'nope'"):
        form.start_from_recipe("nope")
