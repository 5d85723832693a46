from workbench import train
from workbench.cli.main import main
from workbench.plan.report import run_report


def test_report_compares_prediction_with_measurement(make_cfg, capsys):
    r = train(make_cfg(**{"schedule.max_steps": 2, "output.memory_every": 2}))
    rows = {row.category: row for row in run_report(r.run_dir)[0]}
    assert set(rows) == {"weights", "gradients", "optimizer_state", "master_weights"}
    assert all(row.error == 0 for row in rows.values()), rows  # single process: exact
    assert rows["gradients"].measured == 30720 * 4
    assert main(["report", str(r.run_dir)]) == 0
    assert "optimizer_state" in capsys.readouterr().out


def test_report_compares_gradients_on_a_run_shorter_than_memory_every(make_cfg):
    # Only the run's closing memory event follows a backward; it carries the gradients of the last step's peak.
    r = train(make_cfg(**{"schedule.max_steps": 4}))
    rows = {row.category: row for row in run_report(r.run_dir)[0]}
    assert rows["gradients"].measured == rows["gradients"].predicted == 30720 * 4
