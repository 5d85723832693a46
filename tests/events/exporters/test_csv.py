"""The CSV exporter: one file per event type, on a real (tiny) run's log."""

from __future__ import annotations

import csv
import json

from workbench import train
from workbench.events.exporters import export_events
from workbench.runs.layout import EVENTS_FILE


def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_exports_one_csv_per_event_type(make_cfg, tmp_path):
    run = train(make_cfg(**{"schedule.max_steps": 3}))
    result = export_events(run.run_dir / EVENTS_FILE, "csv")
    assert result.out_dir == run.run_dir / "csv"
    assert {"run_started", "step", "census", "memory", "run_finished"} <= {p.stem for p in result.out_dir.glob("*.csv")}
    rows = read_csv(result.out_dir / "step.csv")
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert [float(r["loss"]) for r in rows] == run.losses
    assert isinstance(json.loads(read_csv(result.out_dir / "census.csv")[0]["rows"]), list)


def test_a_field_first_seen_in_a_later_batch_becomes_a_column(tmp_path):
    from workbench.events.exporters.csv import CsvExporter

    out = CsvExporter(tmp_path)
    out.write([{"type": "note", "v": 1, "a": 1}])
    out.flush()
    out.write([{"type": "note", "v": 1, "a": 2, "b": {"x": [1]}}])
    out.close()
    assert read_csv(tmp_path / "note.csv") == [
        {"type": "note", "v": "1", "a": "1", "b": ""},
        {"type": "note", "v": "1", "a": "2", "b": '{"x": [1]}'},
    ]
