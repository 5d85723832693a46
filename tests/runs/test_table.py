"""One listing of a runs directory, typed rows, for ``workbench runs`` and the runs panel."""

import pytest

from workbench.cli.main import main
from workbench.events import EventWriter, RunFinished, RunStarted, read_events
from workbench.runs import RunRow, list_runs

from ..ui.run_logs import step_event


def _run(root, name, losses=(), rank1_step=None, finished=True):
    d = root / name
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    with EventWriter(d / "events.jsonl") as w:
        w.emit(
            RunStarted(
                run_dir=str(d),
                config={"model": {"source": "tiny-glm4"}},
                hardware={},
                versions={},
                precision={"mode": "bf16"},
                total_steps=5,
            )
        )
        for n, loss in enumerate(losses, start=1):
            w.emit(step_event(n, loss=loss, tokens=1, eta_s=0.0))
        if finished:
            w.emit(RunFinished(step=len(losses), final_loss=None, adapter_path=None, wall_s=1.0))
    if rank1_step is not None:  # another rank's copy of a later step: rank 0 speaks for the run
        with EventWriter(d / "events.jsonl", rank=1) as w:
            w.emit(step_event(rank1_step, loss=9.0, tokens=1, eta_s=0.0))
    return d


def test_rows_are_typed_sorted_and_read_from_rank_0(tmp_path):
    _run(tmp_path, "b", losses=(2.0, 1.5), rank1_step=7)
    _run(tmp_path, "a", losses=(2.0, float("nan")))
    _run(tmp_path, "c")
    (tmp_path / "not-a-run").mkdir()
    rows = list_runs(tmp_path)
    assert [r.name for r in rows] == ["a", "b", "c"] and all(isinstance(r, RunRow) for r in rows)
    a, b, c = rows
    assert (b.status, b.step, b.total_steps, b.loss, b.model, b.precision) == (
        "finished",
        2,
        5,
        1.5,
        "tiny-glm4",
        "bf16",
    )
    assert a.step == 2 and a.loss is None  # a non-finite last loss is no number to print
    assert c.step == 0 and c.loss is None and b.path == tmp_path / "b"
    assert list_runs(tmp_path / "missing") == []


def test_the_cli_prints_the_same_rows(capsys, tmp_path):
    _run(tmp_path, "a", losses=(2.0, 1.25))
    _run(tmp_path, "c")
    assert main(["runs", "--runs-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "status", "step", "loss", "model", "precision"]  # the magic's table
    assert lines[1].split() == ["a", "finished", "2/5", "1.2500", "tiny-glm4", "bf16"]
    assert lines[2].split() == ["c", "finished", "0/5", "-", "tiny-glm4", "bf16"]
    with pytest.raises(SystemExit) as exc:  # a runs directory that does not exist is named, exit 2 (#14)
        main(["runs", "--runs-dir", str(tmp_path / "missing")])
    assert exc.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_a_run_training_in_the_foreground_is_running_not_failed(make_cfg):
    """A run trained in the user's own process (a terminal, a notebook) has no worker.pid: while it trains the
    runs list must say running (not record a silent death), and finished after."""
    from workbench.engine import run_engine
    from workbench.engine.observers import Observer
    from workbench.runs import attach

    seen = []

    class Look(Observer):
        def after_step(self, run, step, outcome, loss):
            seen.append([r.status for r in list_runs(run.cfg.output.runs_dir)])

    result = run_engine(make_cfg(**{"schedule.max_steps": 2, "output.run_name": "fg"}), observers=[Look()])
    assert seen == [["running"], ["running"]]
    handle = attach(result.run_dir)
    assert handle.foreground and handle.status() == "finished"
    assert not [e for e in read_events(result.run_dir / "events.jsonl", 0, typed=False)[0] if e["type"] == "run_failed"]
