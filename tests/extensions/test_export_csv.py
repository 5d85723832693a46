import csv
import importlib.util
import json
from pathlib import Path

from workbench import train

SPEC = importlib.util.spec_from_file_location("export_csv", Path(__file__).parents[2] / "extensions" / "export_csv.py")
export_csv = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(export_csv)


def test_exports_one_csv_per_event_type(make_cfg, tmp_path):
    run = train(make_cfg(**{"schedule.max_steps": 3}))
    written = export_csv.export(run.run_dir, tmp_path / "csv")
    assert {"run_started", "step", "census", "memory", "run_finished"} <= set(written)
    with open(written["step"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert [float(r["loss"]) for r in rows] == run.losses
    with open(written["census"], newline="") as fh:
        assert isinstance(json.loads(next(csv.DictReader(fh))["rows"]), list)
    assert export_csv.main([str(tmp_path / "nowhere")]) == 2
