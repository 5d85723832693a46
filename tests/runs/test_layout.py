"""The one definition of a run directory and of what it holds: is it one, what did it train, its base model."""

import json

import pytest

from workbench.config import ConfigError
from workbench.runs import base_model, has_adapter, is_run_dir, run_config, run_dir_of, run_dirs, trained_weights


def _run(root, name, source="tiny-glm4", weights=None):
    d = root / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model": {"source": source}}))
    if weights == "adapter":
        (d / "adapter").mkdir()
        (d / "adapter" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/cache/x"}))
    elif weights == "model":
        (d / "model").mkdir()
        (d / "model" / "config.json").write_text("{}")
    return d


def test_a_run_directory_holds_config_json_or_an_event_log(tmp_path):
    run = _run(tmp_path, "r")
    (tmp_path / "only-log").mkdir()
    (tmp_path / "only-log" / "events.jsonl").write_text("")  # an event log copied on its own
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("")
    assert is_run_dir(run) and is_run_dir(tmp_path / "only-log")
    assert not is_run_dir(tmp_path / "other") and not is_run_dir(tmp_path / "missing")
    assert run_dirs(tmp_path) == [tmp_path / "only-log", run]


def test_what_a_run_trained_adapter_full_model_or_nothing_yet(tmp_path):
    lora, full, going = (
        _run(tmp_path, "lora", weights="adapter"),
        _run(tmp_path, "full", weights="model"),
        _run(tmp_path, "going"),
    )
    assert trained_weights(lora).kind == "adapter" and trained_weights(lora).path == lora / "adapter"
    assert trained_weights(full).kind == "model" and trained_weights(full).path == full / "model"
    assert trained_weights(going) is None
    (going / "adapter").mkdir()  # created, not saved yet: peft writes adapter_config.json after the weights
    assert trained_weights(going) is None and not has_adapter(going)
    assert has_adapter(lora) and not has_adapter(full)


def test_the_run_a_path_belongs_to(tmp_path):
    lora, full = _run(tmp_path, "lora", weights="adapter"), _run(tmp_path, "full", weights="model")
    assert run_dir_of(lora) == lora and run_dir_of(lora / "adapter") == lora and run_dir_of(full / "model") == full
    plain = tmp_path / "plain" / "adapter"  # an adapter folder outside any run
    plain.mkdir(parents=True)
    (plain / "adapter_config.json").write_text("{}")
    assert run_dir_of(plain) is None and run_dir_of(tmp_path / "lora" / "exports") is None
    assert run_dir_of("tiny-glm4") is None


def test_base_model_is_the_configs_source_not_the_adapters_declared_path(tmp_path):
    run = _run(tmp_path, "r", source="smollm2-135m", weights="adapter")
    assert base_model(run) == "smollm2-135m" and run_config(run).model.source == "smollm2-135m"
    (run / "config.json").write_text(json.dumps({"lora": {"r": 0}}))
    with pytest.raises(ConfigError, match="lora.r"):
        base_model(run)


def _model_dir(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "glm4v"}))
    (path / "model.safetensors").write_bytes(b"")
    return path


def test_a_model_directory_is_no_run_and_a_runs_merged_model_or_export_belongs_to_it(tmp_path):
    from workbench.runs import is_model_dir, trained_at

    run = _run(tmp_path, "r", weights="model")
    (run / "model" / "model.safetensors").write_bytes(b"")
    merged, export = _model_dir(run / "merged"), _model_dir(run / "exports" / "merged-float32")
    plain = _model_dir(tmp_path / "cache" / "tiny")
    assert all(is_model_dir(d) and not is_run_dir(d) for d in (merged, export, plain, run / "model"))
    assert run_dir_of(merged) == run_dir_of(export) == run_dir_of(run / "model") == run and run_dir_of(plain) is None
    found = {p: trained_at(p) for p in (run, run / "model", merged, export, plain)}
    assert {p: (f.weights.kind, f.weights.path, f.run_dir) for p, f in found.items()} == {
        run: ("model", run / "model", run),
        run / "model": ("model", run / "model", run),
        merged: ("model", merged, run),
        export: ("model", export, run),
        plain: ("model", plain, None),
    }
    lora = _run(tmp_path, "l", weights="adapter")
    assert trained_at(lora).weights.kind == "adapter" and trained_at(lora / "adapter").run_dir == lora
    nothing = _run(tmp_path, "n")
    assert trained_at(nothing).weights is None and trained_at(tmp_path / "cache") is None


def test_merge_adapters_help_names_the_folder_the_run_saves_it_in():
    from workbench.config import RunConfig
    from workbench.runs.layout import ADAPTER_DIR, MERGED_DIR

    help_text = RunConfig.model_fields["checkpointing"].annotation.model_fields["merge_adapter"].description
    assert f"RUN_DIR/{MERGED_DIR} " in help_text and f"RUN_DIR/{ADAPTER_DIR})" in help_text
