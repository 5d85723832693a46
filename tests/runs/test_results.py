"""A run's stored task metrics (RUN_DIR/eval_results.json): an unreadable file is said so and never overwritten."""

from __future__ import annotations

import json

import pytest

from workbench.eval.runner import EvalReport
from workbench.runs.results import RESULTS_FILE, read_results, write_results


def _report() -> EvalReport:
    return EvalReport(
        "identity",
        "heldout.jsonl",
        "http://x/v1",
        {"base": "smol", "n": 1},
        1.0,
        {"run": {"default": {"n": 1, "introduces": 1.0}}},
    )


def test_an_unreadable_results_file_is_kept_aside_not_overwritten(tmp_path):
    (tmp_path / RESULTS_FILE).write_text('{"tasks": {"phone_actions": {"metrics": ', encoding="utf-8")  # cut short
    with pytest.warns(UserWarning, match=f"{RESULTS_FILE} could not be read"):
        assert read_results(tmp_path) == {}
    with pytest.warns(UserWarning, match="moved to eval_results.unreadable.json"):
        write_results(tmp_path, _report(), "run")
    assert (
        (tmp_path / "eval_results.unreadable.json").read_text(encoding="utf-8").startswith('{"tasks": {"phone_actions"')
    )
    assert list(json.loads((tmp_path / RESULTS_FILE).read_text(encoding="utf-8"))["tasks"]) == ["identity"]


def test_a_missing_results_file_is_just_empty(tmp_path, recwarn):
    assert read_results(tmp_path) == {}
    write_results(tmp_path, _report(), "run")
    assert list(read_results(tmp_path)["tasks"]) == ["identity"] and not recwarn.list
