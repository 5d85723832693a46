"""python -m workbench.bench.long_run at tiny sizes: it writes the logs it says and prints every figure."""

import json

from workbench.bench.long_run import OVERFLOW_EVERY, main, measure, write_log
from workbench.ui.run_state import CHART_POINTS, RECENT_STEPS


def test_the_synthetic_log_has_one_step_a_step_memory_every_10_and_overflows(tmp_path):
    write_log(tmp_path / "run", 2000)
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_started" and kinds.count("step") == 2000 and kinds.count("memory") == 200
    skipped = [e["step"] for e in events if e["type"] == "step" and e["skipped"]]
    assert skipped == [e["step"] for e in events if e["type"] == "overflow"] == [OVERFLOW_EVERY, 2 * OVERFLOW_EVERY]


def test_each_size_is_measured_and_the_charts_stay_bounded(tmp_path, capsys):
    row = measure(tmp_path / "runs", 3000)
    assert all(row[k] is not None and row[k] >= 0 for k in ("row_s", "runs_s", "attach_s", "update_s"))
    assert row["points"] <= CHART_POINTS + RECENT_STEPS + 1 < 3000
    assert main(["--sizes", "200", "1000", "--dir", str(tmp_path / "bench")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| steps | log | row update") and [line.split("|")[1].strip() for line in table[2:]] == [
        "200",
        "1,000",
    ]
