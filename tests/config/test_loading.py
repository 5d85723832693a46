import json

import pytest

from tests.conftest import SAMPLES
from workbench.config import ConfigError, RunConfig, config_from_dict, load_config, replace, save_config

VALID_TRAIN = str(SAMPLES / "identity" / "train.jsonl")


def problems_of(data) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    return dict(exc.value.problems)


# (config, field path that must be named, a word the message must contain)
BAD_CONFIGS = [
    ({"precision": {"mode": "fp8"}}, "precision.mode", "fp16"),
    ({"precision": {"backoff_factor": 1.5}}, "precision.backoff_factor", "less than 1"),
    ({"precision": {"growth_factor": 1.0}}, "precision.growth_factor", "greater than 1"),
    ({"precision": {"init_scale": 0}}, "precision.init_scale", "greater than 0"),
    ({"precision": {"growth_interval": 0}}, "precision.growth_interval", "greater than or equal to 1"),
    ({"precision": {"max_grad_norm": -1}}, "precision.max_grad_norm", "greater than 0"),
    ({"lora": {"r": 0}}, "lora.r", "greater than or equal to 1"),
    ({"lora": {"dropout": 1.0}}, "lora.dropout", "less than 1"),
    ({"lora": {"target_modules": []}}, "lora.target_modules", "empty list"),
    ({"lora": {"target_modules": "everything"}}, "lora.target_modules", "all-linear"),
    ({"lora": {"bias": "some"}}, "lora.bias", "lora_only"),
    ({"schedule": {"micro_batch_size": 0}}, "schedule.micro_batch_size", "greater than or equal to 1"),
    ({"schedule": {"grad_accum_steps": "two"}}, "schedule.grad_accum_steps", "integer"),
    ({"schedule": {"learning_rate": 5}}, "schedule.learning_rate", "less than 1"),
    ({"schedule": {"max_steps": 5, "warmup_steps": 10}}, "schedule.warmup_steps", "exceeds max_steps"),
    ({"data": {"train": "no/such/file.jsonl"}}, "data.train", "file not found"),
    ({"data": {"eval": "missing-eval.jsonl"}}, "data.eval", "file not found"),
    ({"data": {"max_length": 4}}, "data.max_length", "greater than or equal to 8"),
    ({"data": {"format": "csv"}}, "data.format", "instruction"),
    ({"model": {"dtype": "int8"}}, "model.dtype", "bfloat16"),
    ({"model": {"sources": "x"}}, "model.sources", "unknown key"),
    ({"optimiser": {}}, "optimiser", "unknown key"),
    ({"device": "tpu"}, "device", "cuda:N"),
    ({"lora": {"enabled": False}, "model": {"dtype": "float16"}}, "model.dtype", "master weights"),
    ({"precision": {"mode": "pure-bf16"}, "model": {"dtype": "float16"}}, "model.dtype", "pure-bf16"),
    ({"checkpointing": {"keep_last": 0}}, "checkpointing.keep_last", "greater than or equal to 1"),
]


@pytest.mark.parametrize("data,path,word", BAD_CONFIGS, ids=[b[1] + ":" + b[2] for b in BAD_CONFIGS])
def test_each_bad_config_names_its_field(data, path, word):
    probs = problems_of(data)
    assert path in probs, probs
    assert word in probs[path]


def test_every_problem_is_reported_at_once():
    data = {
        "precision": {"mode": "fp8"},
        "lora": {"r": 0},
        "data": {"train": "nope.jsonl"},
        "schedule": {"max_steps": 2, "warmup_steps": 5},
        "model": {"typo": 1},
    }
    probs = problems_of(data)
    # Field errors and the cross-field checks of sections that parsed, in one report.
    assert {"precision.mode", "lora.r", "data.train", "schedule.warmup_steps", "model.typo"} <= set(probs)
    msg = str(ConfigError(list(probs.items())))
    assert msg.startswith("5 problem(s)")


def test_overrides_files_and_roundtrip(tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text("precision:\n  mode: fp16\n  init_scale: 1024\nlora:\n  target_modules: [q_proj, v_proj]\n")
    cfg = load_config(f, ["schedule.max_steps=7", "lora.r=8", "data.eval=null"])
    assert cfg.precision.mode == "fp16" and cfg.precision.init_scale == 1024
    assert cfg.lora.target_modules == ["q_proj", "v_proj"] and cfg.lora.r == 8
    assert cfg.schedule.max_steps == 7 and cfg.data.eval is None
    out = tmp_path / "config.json"
    save_config(cfg, out)
    assert load_config(out) == cfg
    assert replace(cfg, **{"precision.mode": "bf16"}).precision.mode == "bf16"


def test_config_is_frozen():
    from pydantic import ValidationError

    cfg = RunConfig()
    with pytest.raises(ValidationError, match="frozen"):
        cfg.precision.mode = "fp16"
    with pytest.raises(ValidationError, match="frozen"):
        cfg.precision = cfg.precision
    assert cfg.precision.mode == "auto"


@pytest.mark.parametrize(
    "text,suffix,word",
    [
        ("precision: [", ".yaml", "not valid YAML"),
        ("{bad json", ".json", "not valid JSON"),
        ("- a\n- b\n", ".yaml", "mapping"),
    ],
)
def test_bad_config_files(tmp_path, text, suffix, word):
    f = tmp_path / f"cfg{suffix}"
    f.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert exc.value.problems[0][0] == "--config" and word in exc.value.problems[0][1]


def test_bad_override_syntax():
    with pytest.raises(ConfigError) as exc:
        load_config(None, ["precision.mode"])
    assert "key=value" in str(exc.value)


def test_list_items_are_named_with_their_index():
    probs = problems_of(
        {
            "precision": {
                "module_rules": [{"pattern": "lm_head", "storage": "float32"}, {"pattern": "x", "storage": "int4"}]
            }
        }
    )
    assert any(path.startswith("precision.module_rules[1].storage") for path in probs), probs


# (file bytes, or None for a directory; the problem the --config line must state)
UNREADABLE_CONFIGS = [
    (bytes(range(128, 256)), "cfg.yaml:1: not UTF-8 text (byte 0x80 at column 1)"),
    ("precision:\n  mode: fp16\n# café\n".encode("latin-1"), "cfg.yaml:3: not UTF-8 text (byte 0xe9 at column 6)"),
    (None, "cfg.yaml: is a directory, not a file"),
    (b"\x00\x01\x02binary", "not valid YAML"),
]


@pytest.mark.parametrize("content,problem", UNREADABLE_CONFIGS, ids=["random-bytes", "latin-1", "directory", "binary"])
def test_unreadable_config_files_name_the_file_and_line(tmp_path, content, problem):
    f = tmp_path / "cfg.yaml"
    f.mkdir() if content is None else f.write_bytes(content)
    assert problem in problems_of_file(f)["--config"]


def problems_of_file(path) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    return dict(exc.value.problems)


def test_missing_config_file():
    assert problems_of_file("no/such/run.yaml") == {"--config": "no/such/run.yaml: file not found"}


@pytest.mark.parametrize(
    "suffix,text", [(".yaml", "precision:\n  mode: fp16\n"), (".json", '{"precision": {"mode": "fp16"}}')]
)
def test_byte_order_mark_and_empty_files_load(tmp_path, suffix, text):
    f = tmp_path / f"cfg{suffix}"
    f.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_config(f).precision.mode == "fp16"
    empty = tmp_path / "empty.yaml"
    empty.write_bytes(b"")
    assert load_config(empty) == load_config(None)
    section_not_mapping = tmp_path / "section.yaml"
    section_not_mapping.write_text("precision: fp16\n")
    assert "valid dictionary" in problems_of_file(section_not_mapping)["precision"]


@pytest.mark.parametrize("name", ["../../x", "../x", "/tmp/x", "a/b", "a\\b", "..", ".", "", "  ", "x\x00y"])
def test_run_name_is_one_directory_name(name):
    probs = problems_of({"output": {"run_name": name}})
    assert "inside output.runs_dir" in probs["output.run_name"], probs


def test_run_directory_never_resolves_outside_runs_dir(tmp_path):
    from workbench.runs import new_run_dir

    runs, outside = tmp_path / "runs", tmp_path / "outside"
    runs.mkdir()
    outside.mkdir()
    (runs / "link").symlink_to(outside)  # a name the schema accepts, leading elsewhere
    with pytest.raises(ConfigError) as exc:
        new_run_dir(config_from_dict({"output": {"runs_dir": str(runs), "run_name": "link"}}))
    assert exc.value.problems[0][0] == "output.run_name" and "outside output.runs_dir" in exc.value.problems[0][1]
    made = new_run_dir(config_from_dict({"output": {"runs_dir": str(runs), "run_name": "fine-1"}}))
    assert made == runs / "fine-1" and made.is_dir()


def test_sample_data_paths_work_from_any_directory(tmp_path, monkeypatch):
    from workbench.config.samples import samples_dir

    monkeypatch.chdir(tmp_path)  # no data_samples/ here
    cfg = config_from_dict({})  # the defaults name data_samples/identity/*.jsonl
    assert cfg.data.train == str(samples_dir() / "identity" / "train.jsonl")
    assert cfg.data.eval == str(samples_dir() / "identity" / "heldout.jsonl")
    assert load_config(None, {"data.train": "data_samples/phone_actions/train.jsonl"}).data.train == str(
        samples_dir() / "phone_actions" / "train.jsonl"
    )
    # A data_samples/ folder of the user's own, in the working directory, comes first.
    own = tmp_path / "data_samples" / "identity" / "train.jsonl"
    own.parent.mkdir(parents=True)
    own.write_text(VALID_TRAIN_ROW)
    assert config_from_dict({}).data.train == "data_samples/identity/train.jsonl"
    assert problems_of({"data": {"train": "data_samples/nope.jsonl"}})["data.train"].startswith(
        "file not found: 'data_samples/nope.jsonl'"
    )
    assert "is a directory" in problems_of({"data": {"train": str(tmp_path)}})["data.train"]


VALID_TRAIN_ROW = json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})


def test_a_renamed_key_is_refused_naming_its_new_name_in_a_file_and_on_the_command_line(tmp_path, capsys):
    """schedule.eval_every (the eval loss) sat beside eval.every (the tasks' metrics): it is schedule.eval_loss_every
    now, with no alias. An old key in a user's YAML or flags is an error naming the new key, with the other problems."""
    from workbench.cli.main import main

    f = tmp_path / "old.yaml"
    f.write_text("schedule:\n  eval_every: 10\nlora:\n  r: 0\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert dict(exc.value.problems) == {
        "schedule.eval_every": "renamed: use schedule.eval_loss_every",
        "lora.r": "Input should be greater than or equal to 1 (got 0)",
    }
    assert load_config(None, {"schedule.eval_loss_every": 10}).schedule.eval_loss_every == 10
    assert main(["train", "--schedule.eval_every", "10", "--print-config"]) == 2
    assert "schedule.eval_every: renamed: use schedule.eval_loss_every" in capsys.readouterr().err


def test_a_run_saved_before_a_rename_is_read_under_the_new_names(tmp_path):
    from workbench.runs.layout import run_config

    cfg = config_from_dict({"schedule": {"eval_loss_every": 7}})
    saved = json.loads(json.dumps(cfg.model_dump(mode="json")))
    saved["schedule"]["eval_every"] = saved["schedule"].pop("eval_loss_every")  # what an older workbench wrote
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert run_config(tmp_path).schedule.eval_loss_every == 7
