from workbench.cli.main import main
from workbench import train
from workbench.plan.report import run_report


def test_report_compares_prediction_with_measurement(make_cfg, capsys):
    r = train(make_cfg(**{"schedule.max_steps": 2, "output.memory_every": 2}))
    rows = {row.category: row for row in run_report(r.run_dir)[0]}
    assert set(rows) == {"weights", "gradients", "optimizer_state", "master_weights"}
    assert all(row.error == 0 for row in rows.values()), rows  # single process: exact
    assert rows["gradients"].measured == 30720 * 4
    assert main(["report", str(r.run_dir)]) == 0
    assert "optimizer_state" in capsys.readouterr().out
