"""`workbench export-events`: exporters by name, clear usage errors, --follow on a live log."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import REPO
from tests.events.exporters.sample_logs import fp16_run_events, started, step, write_run
from workbench.cli.main import main
from workbench.events import RunFinished


def loss_steps(logdir) -> list[int]:
    if not logdir.is_dir():
        return []
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [s.step for s in acc.Scalars("train/loss")] if "train/loss" in acc.Tags()["scalars"] else []


def test_exports_to_csv(tmp_path, capsys):
    run = write_run(tmp_path / "runs" / "r", fp16_run_events())
    assert main(["export-events", str(run), "--to", "csv", "--out", str(tmp_path / "out")]) == 0
    assert f"11 events -> {tmp_path / 'out'}" in capsys.readouterr().out
    assert (tmp_path / "out" / "step.csv").read_text().count("\n") == 5  # header + 4 steps


def test_an_unknown_exporter_or_a_missing_run_is_a_usage_error(tmp_path, capsys):
    run = write_run(tmp_path / "runs" / "r", fp16_run_events())
    assert main(["export-events", str(run), "--to", "parquet"]) == 2
    assert "error: unknown exporter 'parquet': the installed exporters are csv, tensorboard" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["export-events", str(tmp_path / "runs" / "nope"), "--to", "csv"])
    assert exit_.value.code == 2 and "runs/nope' does not exist" in capsys.readouterr().err


def test_follow_exports_events_appended_while_it_runs(tmp_path):
    run = write_run(tmp_path / "runs" / "live", [started(), step(1)])
    (run / "worker.pid").write_text(str(os.getpid()))  # a live "worker": the run goes on until its end event
    out = tmp_path / "tb"
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench",
            "export-events",
            str(run),
            "--to",
            "tensorboard",
            "--out",
            str(out),
            "--follow",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 120
        while loss_steps(out) != [1]:  # the follower has exported what was there before anything is appended
            assert follower.poll() is None, follower.communicate()
            assert time.monotonic() < deadline, "the follower never exported step 1"
            time.sleep(0.2)
        write_run(run, [step(2), step(3)])
        write_run(run, [RunFinished(step=3, final_loss=0.5, adapter_path=None, wall_s=1.0)])
        stdout, stderr = follower.communicate(timeout=120)
    finally:
        follower.kill()
    assert follower.returncode == 0, stderr
    assert loss_steps(out) == [1, 2, 3]
    assert f"5 events -> {out}" in stdout
