"""Exporters are found through the entry-point group, including a third party's (a real dist-info on sys.path)."""

from __future__ import annotations

import json
import textwrap

import pytest

from workbench.events.exporters import (
    ENTRY_POINT_GROUP,
    ExporterError,
    export_events,
    installed_exporters,
    load_exporter,
)
from workbench.events.exporters.csv import CsvExporter
from workbench.events.exporters.tensorboard import TensorBoardExporter
from workbench.runs.layout import EVENTS_FILE

THIRD_PARTY = """
import json
from pathlib import Path


class StepCountExporter:
    description = "counts step events"
    default_dir = "step-count"

    def __init__(self, out_dir):
        self.out_dir, self.steps = Path(out_dir), []

    def write(self, events):
        self.steps += [e["step"] for e in events if e["type"] == "step"]

    def flush(self):
        (self.out_dir / "steps.json").write_text(json.dumps(self.steps))

    def close(self):
        self.flush()
"""


def install_third_party(site, entry_points: str) -> None:
    """A package 'acme-exporters' as pip would install it: its module and a dist-info declaring entry points."""
    (site / "acme_exporters.py").write_text(THIRD_PARTY)
    info = site / "acme_exporters-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-exporters\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_workbench_declares_its_own_exporters():
    assert {"csv", "tensorboard"} <= set(installed_exporters())
    assert load_exporter("csv") is CsvExporter and load_exporter("tensorboard") is TensorBoardExporter


def test_a_third_party_exporter_is_found_and_used_by_name(fp16_run, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    install_third_party(
        site,
        f"""
        [{ENTRY_POINT_GROUP}]
        step-count = acme_exporters:StepCountExporter
        broken = acme_exporters_gone:Exporter
    """,
    )
    assert "step-count" not in installed_exporters()
    monkeypatch.syspath_prepend(str(site))
    assert {"csv", "tensorboard", "step-count", "broken"} <= set(installed_exporters())
    result = export_events(fp16_run / EVENTS_FILE, "step-count")
    assert json.loads((fp16_run / "step-count" / "steps.json").read_text()) == [1, 2, 3, 4]
    assert result.out_dir == fp16_run / "step-count"
    with pytest.raises(
        ExporterError, match=r"'broken' \(acme_exporters_gone:Exporter\) could not be loaded: ModuleNotFoundError"
    ):
        load_exporter("broken")


def test_an_unknown_exporter_lists_the_installed_ones(fp16_run):
    with pytest.raises(
        ExporterError, match=r"unknown exporter 'parquet': the installed exporters are .*csv, tensorboard"
    ):
        export_events(fp16_run / EVENTS_FILE, "parquet")
    assert not (fp16_run / "parquet").exists()
