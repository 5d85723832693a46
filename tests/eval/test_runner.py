"""``evaluate`` and ``workbench eval`` against running servers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.runs.results import RESULTS_FILE, read_results
from workbench.eval.runner import EvalError, evaluate

from ..conftest import SAMPLES, tiny_run_overrides, write_jsonl
from ..serve.helpers import make_adapter

PHONE = SAMPLES / "phone_actions" / "heldout.jsonl"


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    """A tiny-GLM-4 server with the base and one (random) adapter served from a run directory."""
    from workbench.serve import start_server

    run = make_adapter("tiny-glm4", tmp_path_factory.mktemp("runs") / "tiny-run", seed=3)
    with start_server("tiny-glm4", runs=[str(run)], max_batch=8, threads=1) as srv:
        yield srv, run


def test_evaluate_scores_every_model_and_mode_and_stores_the_adapter_results(tiny_pair):
    srv, run = tiny_pair
    report = evaluate("phone_actions", server=srv.url, limit=3, max_tokens=8, enable_thinking="both", progress=False)
    assert set(report.metrics) == {"tiny-glm4", "tiny-run"}
    assert set(report.metrics["tiny-run"]) == {"on", "off"}
    assert report.metrics["tiny-glm4"]["on"]["n"] == 3
    assert [r["index"] for r in report.records["tiny-run"]["off"]] == [1, 2, 3]
    # a random model writes no valid action
    assert report.metrics["tiny-run"]["off"]["parse_rate"] == 0.0
    assert report.written == [str(run / RESULTS_FILE)]
    stored = read_results(run)["tasks"]["phone_actions"]
    assert stored["model"] == "tiny-run" and stored["metrics"] == report.metrics and "records" not in stored
    # another task keeps the first one's entry
    evaluate("identity", server=srv, models=["tiny-run"], limit=2, max_tokens=4, progress=False)
    assert set(read_results(run)["tasks"]) == {"phone_actions", "identity"}


def test_greedy_evaluation_is_deterministic_under_concurrency(tiny_pair):
    srv, _ = tiny_pair
    one = evaluate("text", server=srv, limit=6, max_tokens=8, concurrency=1, write=False, progress=False)
    eight = evaluate("text", server=srv, limit=6, max_tokens=8, concurrency=8, write=False, progress=False)
    assert one.records == eight.records
    seeded = [evaluate("text", server=srv, models=["tiny-glm4"], limit=3, max_tokens=8, temperature=1.0, seed=7,
                       write=False, progress=False).records for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_bad_requests_are_eval_errors(tiny_pair, tmp_path):
    srv, _ = tiny_pair
    with pytest.raises(EvalError, match="'nope' not served"):
        evaluate("text", ["nope"], server=srv, progress=False)
    with pytest.raises(EvalError, match="enable_thinking"):
        evaluate("text", server=srv, enable_thinking="sometimes", progress=False)
    from workbench.data import DataError
    with pytest.raises(DataError, match="empty.jsonl"):
        evaluate("text", server=srv, data=write_jsonl(tmp_path / "empty.jsonl", [""]), progress=False)


def test_cli_prints_json_and_exits_2_on_bad_input(tiny_pair, capsys):
    from workbench.cli.main import main

    srv, _ = tiny_pair
    assert main(["eval", "--server", srv.url, "--task", "identity", "--model", "tiny-glm4", "--limit", "2",
                 "--max-tokens", "4", "--json", "--no-write"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["tiny-glm4"]["default"]["n"] == 2 and len(out["records"]["tiny-glm4"]["default"]) == 2
    assert main(["eval", "--server", srv.url, "--task", "identity", "--model", "nope"]) == 2
    assert "not served" in capsys.readouterr().err
    assert main(["eval", "--server", srv.url, "--task", "identity", "--limit", "1", "--max-tokens", "2", "--no-write"]) == 0
    table = capsys.readouterr().out
    assert "identity_rate" in table and "tiny-run" in table


def test_trained_adapter_beats_the_base_on_phone_action_exact_match(tmp_path):
    """SmolLM2 fine-tuned (LoRA, a few steps) on three held-out phone rows, then evaluated on them through a
    server this call starts: the adapter writes the actions, the base does not."""
    from workbench.config import load_config
    from workbench.training import train

    rows = [line for line in PHONE.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["output"] in ('do(action="Home")', 'do(action="Back")', 'finish(message="The call to Mom is connected.")')]
    assert len(rows) == 3
    data = write_jsonl(tmp_path / "phone.jsonl", rows)
    cfg = load_config(None, tiny_run_overrides(tmp_path / "runs", **{
        "model.source": "smollm2-135m-instruct", "data.train": str(data), "data.max_length": 96,
        "schedule.max_steps": 6, "schedule.micro_batch_size": 3, "schedule.learning_rate": 3e-3,
        "lora.r": 8, "lora.alpha": 16, "lora.dropout": 0.0, "output.run_name": "phone"}))
    run_dir = train(cfg).run_dir
    report = evaluate("phone_actions", data=data, runs=[run_dir], max_tokens=24, progress=False)
    base, tuned = report.metrics["smollm2-135m-instruct"]["default"], report.metrics["phone"]["default"]
    assert tuned["exact_match"] > base["exact_match"]
    assert tuned["parse_rate"] == 1.0
    assert read_results(Path(run_dir))["tasks"]["phone_actions"]["metrics"]["phone"]["default"] == tuned
