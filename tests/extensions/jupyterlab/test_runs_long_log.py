"""The side panel's first look at a long run goes through the one reader of a log (``events.reader``): the
overview from the writer's index, every overflow and skipped step counted (issue 25)."""

from workbench_jupyterlab.runs import SPARKLINE_POINTS, RunsDirectory

from workbench.bench.long_run import OVERFLOW_EVERY, write_log
from workbench.events import log as events_log
from workbench.events import reader


def test_the_side_panels_row_of_a_long_run_comes_from_its_overview(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "SAMPLE_ABOVE_BYTES", 64 << 10)
    monkeypatch.setattr(reader, "SAMPLE_WINDOWS", 100)
    monkeypatch.setattr(reader, "WINDOW_BYTES", 1024)
    monkeypatch.setattr(events_log, "ANCHOR_BYTES", 16 << 10)
    overviews = []
    read_overview = reader.read_overview
    monkeypatch.setattr(
        reader, "read_overview", lambda *a, **k: overviews.append(read_overview(*a, **k)) or overviews[-1]
    )
    write_log(tmp_path / "long", 4000)
    [row] = RunsDirectory(tmp_path).rows()
    size = (tmp_path / "long" / "events.jsonl").stat().st_size
    assert len(overviews) == 1 and overviews[0].sampled and overviews[0].bytes_read < size / 2
    assert row["step"] == 4000 and row["overflows"] == row["skipped_steps"] == 4000 // OVERFLOW_EVERY
    assert len(row["loss_series"]) == SPARKLINE_POINTS and row["loss_series"][-1][0] == 4000
