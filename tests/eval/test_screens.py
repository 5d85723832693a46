"""Screenshot rows (data_samples/phone_screens) scored end to end: the harness reads each row's images and sends
them inline, so servers started with their safe defaults answer every request; failed requests are counted, shown
and make ``workbench eval`` exit non-zero, never scored as wrong answers."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workbench.cli.main import main
from workbench.runs.results import metric_rows, read_results

from ..conftest import SAMPLES, tiny_run_overrides

SCREENS = SAMPLES / "phone_screens" / "heldout.jsonl"
ROWS = 4
EVAL = ["--task", "phone_actions_reasoning", "--data", str(SCREENS), "--limit", str(ROWS), "--max-tokens", "8"]


def _json_report(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _every_row_answered(report: dict, models: set[str]) -> None:
    assert set(report["metrics"]) == models
    for model, by_mode in report["records"].items():
        records = by_mode["default"]
        assert [r["error"] for r in records] == [None] * ROWS, model
        assert all(r["verdict"] is not None and r["verdict"]["expected_type"] for r in records)  # a verdict per row
        assert report["metrics"][model]["default"]["failed"] == 0 and report["metrics"][model]["default"]["n"] == ROWS


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """A tiny GLM-4V full fine-tune (lora.enabled false: the weights in RUN/model/) on the screenshots."""
    from workbench.config import load_config
    from workbench.training import train

    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp_path_factory.mktemp("full-runs"),
            **{
                "model.source": "tiny-glm4v",
                "data.train": str(SAMPLES / "phone_screens" / "train.jsonl"),
                "data.max_length": 512,
                "schedule.max_steps": 2,
                "lora.enabled": False,
                "output.run_name": "full",
            },
        ),
    )
    return train(cfg).run_dir


def test_screenshot_rows_scored_through_run_of_a_lora_run(glm4v_screens_run, capsys):
    report = _json_report(capsys, ["eval", "--run", str(glm4v_screens_run), *EVAL, "--json"])
    _every_row_answered(report, {"tiny-glm4v", "screens"})
    assert (
        read_results(glm4v_screens_run)["tasks"]["phone_actions_reasoning"]["metrics"]["screens"]["default"]["failed"]
        == 0
    )


def test_a_full_fine_tune_is_served_beside_its_base_under_the_runs_name(full_run, capsys):
    report = _json_report(capsys, ["eval", "--run", str(full_run), *EVAL, "--json"])
    _every_row_answered(report, {"tiny-glm4v", "full"})
    assert report["settings"]["base"] == "tiny-glm4v" and report["written"] == [str(full_run / "eval_results.json")]
    rows = metric_rows([full_run], "phone_actions_reasoning")  # what the runs panel shows: base vs tuned
    assert [r["label"] for r in rows] == ["tiny-glm4v (base)", "full"] and all(r["failed"] == 0 for r in rows)
    # the run's model/ named itself, and a folder under exports/ (here a copy of model/: what is checked is the
    # name it is served under, RUN-EXPORT, not the export itself, which tests/export covers)
    report = _json_report(capsys, ["eval", "--run", str(full_run / "model"), *EVAL, "--json", "--no-write"])
    assert set(report["metrics"]) == {"tiny-glm4v", "full"}
    export = full_run / "exports" / "merged-float32"
    shutil.copytree(full_run / "model", export)
    report = _json_report(capsys, ["eval", "--run", str(export), *EVAL, "--json"])
    _every_row_answered(report, {"tiny-glm4v", "full-merged-float32"})
    assert read_results(full_run)["tasks"]["phone_actions_reasoning"]["model"] == "full-merged-float32"


def test_the_held_out_loss_of_a_full_fine_tune_is_measured_beside_its_base(full_run, capsys):
    report = _json_report(
        capsys,
        [
            "eval",
            "--run",
            str(full_run),
            "--task",
            "heldout_loss",
            "--data",
            str(SCREENS),
            "--limit",
            str(ROWS),
            "--json",
            "--no-write",
        ],
    )
    base, tuned = report["metrics"]["tiny-glm4v"]["default"], report["metrics"]["full"]["default"]
    assert base["n"] == tuned["n"] == ROWS and base["tokens"] == tuned["tokens"] and tuned["loss"] < base["loss"]


def test_screenshot_rows_scored_through_server_started_with_its_defaults(capsys):
    from workbench.serve import start_server

    with start_server("tiny-glm4v", threads=1) as srv:  # allow_local_images off: data: URLs only
        assert srv.served.config.allow_local_images is False
        report = _json_report(capsys, ["eval", "--server", srv.url, *EVAL, "--json", "--no-write"])
    _every_row_answered(report, {"tiny-glm4v"})


class _Refusing(BaseHTTPRequestHandler):
    """An OpenAI-compatible server in name only: lists one model, answers 400 to every chat request."""

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model", "parent": None}]})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(400, {"error": {"message": "refused: no images today", "type": "invalid_request_error"}})

    def _send(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_server_refusing_every_request_makes_eval_fail_with_the_reason(refusing_server, capsys):
    argv = ["eval", "--server", refusing_server, *EVAL, "--no-write"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert f"m (default): {ROWS} of {ROWS} requests failed" in out and "refused: no images today" in out
    assert "HTTP 400" in out and f"{ROWS} request(s) failed" in err and "--allow-errors" in err
    # no score stands for the rows that got no answer: the metrics are over the 0 answered rows
    report = _json_report(capsys, [*argv, "--json", "--allow-errors"])
    metrics = report["metrics"]["m"]["default"]
    assert metrics["n"] == 0 and metrics["failed"] == ROWS and metrics["parse_rate"] is None
    assert len(metrics["errors"]) == 1 and "refused: no images today" in metrics["errors"][0]
    assert all(r["verdict"] is None for r in report["records"]["m"]["default"])
