"""A run's row from the ends of its log, and followers that read only what was appended (issue 25)."""

import os

from workbench.bench.long_run import write_log
from workbench.events import EventWriter, RunFailed, RunFinished, RunStarted
from workbench.events.reader import LogFollower, summarize_log
from workbench.runs import run_row
from workbench.runs.layout import EVENTS_FILE, FOREGROUND_PID


def _garble_the_middle(log, keep=200_000):
    """Everything but the log's first and last ``keep`` bytes becomes unparsable: whoever reads it gets garbage."""
    data = bytearray(log.read_bytes())
    assert len(data) > 3 * keep
    data[keep:-keep] = b"#" * (len(data) - 2 * keep)
    log.write_bytes(bytes(data))


def test_the_row_of_a_long_log_comes_from_its_ends(tmp_path):
    run = tmp_path / "long"
    write_log(run, 20_000, total_steps=50_000)
    (run / FOREGROUND_PID).write_text(str(os.getpid()))  # alive: running
    log = run / EVENTS_FILE
    _garble_the_middle(log)
    summary = summarize_log(log)
    assert summary.bytes_read < 200_000 < log.stat().st_size / 20  # two ends, not the 5 MB log
    row = run_row(run)
    assert (row.status, row.step, row.total_steps, row.model, row.precision) == (
        "running",
        20_000,
        50_000,
        "tiny-glm4",
        "fp16",
    )
    assert row.loss is not None and abs(row.loss - summary.last_step["loss"]) == 0
    with EventWriter(log) as w:
        w.emit(RunFinished(step=20_000, final_loss=2.5, adapter_path=None, wall_s=1.0, stopped=True))
    assert run_row(run).status == "stopped"


def test_a_follower_reads_only_what_was_appended_and_agrees_with_a_fresh_read(tmp_path):
    run = tmp_path / "run"
    write_log(run, 3000, total_steps=10_000)
    log = run / EVENTS_FILE
    follower = LogFollower(log)
    first = follower.poll()
    assert first.last_step["step"] == 3000 and follower.bytes_read < log.stat().st_size
    for start in (3001, 3101, 3201):
        before, read_before = log.stat().st_size, follower.bytes_read
        write_log(run, 100, start=start)
        with open(log, "ab") as fh:
            fh.write(b'{"type": "step", "rank": 0, "step": 99999')  # a line still being written: not read yet
        s = follower.poll()
        fresh = summarize_log(log)
        assert (s.started, s.last_step, s.end, s.offset) == (fresh.started, fresh.last_step, fresh.end, fresh.offset)
        assert s.last_step["step"] == start + 99
        assert follower.bytes_read - read_before == s.offset - before  # the appended bytes, once
        data = log.read_bytes()
        log.write_bytes(data[: data.rfind(b"\n") + 1])  # the writer finishes nothing: drop the partial line again


def test_a_resumed_run_is_not_ended_by_its_earlier_failure(tmp_path):
    run = tmp_path / "resumed"
    write_log(run, 50, total_steps=100)
    log = run / EVENTS_FILE
    with EventWriter(log) as w:
        w.emit(RunFailed(step=50, error="killed", error_type="WorkerDied"))
    assert summarize_log(log).end["type"] == "run_failed" and run_row(run).status == "failed"
    with EventWriter(log) as w:
        w.emit(
            RunStarted(
                run_dir=str(run),
                config={"model": {"source": "smollm2-135m-instruct"}},
                hardware={},
                versions={},
                total_steps=120,
                precision={"mode": "bf16"},
                start_step=40,
            )
        )
    write_log(run, 10, start=41)
    (run / FOREGROUND_PID).write_text(str(os.getpid()))
    row = run_row(run)
    assert (row.status, row.step, row.total_steps, row.model) == ("running", 50, 120, "smollm2-135m-instruct")
