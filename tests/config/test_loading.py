import json

import pytest

from workbench.config import ConfigError, RunConfig, config_from_dict, load_config, replace, save_config
from tests.conftest import SAMPLES

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
    data = {"precision": {"mode": "fp8"}, "lora": {"r": 0}, "data": {"train": "nope.jsonl"},
            "schedule": {"max_steps": 2, "warmup_steps": 5}, "model": {"typo": 1}}
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
    cfg = RunConfig()
    with pytest.raises(Exception):
        cfg.precision.mode = "fp16"


@pytest.mark.parametrize("text,suffix,word", [("precision: [", ".yaml", "not valid YAML"),
                                              ("{bad json", ".json", "not valid JSON"),
                                              ("- a\n- b\n", ".yaml", "mapping")])
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
    probs = problems_of({"precision": {"module_rules": [{"pattern": "lm_head", "storage": "float32"},
                                                        {"pattern": "x", "storage": "int4"}]}})
    assert any(path.startswith("precision.module_rules[1].storage") for path in probs), probs
