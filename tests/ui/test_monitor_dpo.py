"""A DPO run's dpo_rewards events fold into the reward margin (chosen and rejected beside it) and the reward accuracy,
drawn as two charts shown for DPO runs only."""

from __future__ import annotations

from workbench.events.schema import DpoRewards
from workbench.ui.monitor_panel import RunMonitor
from workbench.ui.run_log import load_run_state

from .run_logs import write_method_run


def _rewards(n: int) -> list:
    return [
        DpoRewards(
            step=n,
            pairs=8,
            beta=0.1,
            loss_type="sigmoid",
            reward_chosen=0.3 * n,
            reward_rejected=-0.1 * n,
            margin=0.4 * n,
            accuracy=0.5 * n,
            logp_chosen=-30.0,
            logp_rejected=-40.0,
        )
    ]


def _write(run_dir, method: str):
    write_method_run(run_dir, method, _rewards if method == "dpo" else lambda n: (), loss=0.6)


def test_state_folds_the_dpo_rewards(tmp_path):
    _write(tmp_path / "d", "dpo")
    s = load_run_state(tmp_path / "d")
    assert {k: v.y for k, v in s.dpo.items()} == {
        "margin": [0.4, 0.8],
        "accuracy": [0.5, 1.0],
        "reward_chosen": [0.3, 0.6],
        "reward_rejected": [-0.1, -0.2],
    }
    assert s.dpo["margin"].x == [1, 2]


def test_monitor_draws_margin_and_accuracy_for_dpo_runs_only(tmp_path):
    _write(tmp_path / "d", "dpo")
    _write(tmp_path / "s", "sft")
    m = RunMonitor()
    m.attach(tmp_path / "d")
    m.wait_sync(10)
    assert {t.name: list(t.y) for t in m.charts.dpo_margin_fig.data} == {
        "margin": [0.4, 0.8],
        "reward chosen": [0.3, 0.6],
        "reward rejected": [-0.1, -0.2],
    }
    assert {t.name: list(t.y) for t in m.charts.dpo_accuracy_fig.data} == {"accuracy": [0.5, 1.0]}
    assert all(m.charts.figure_boxes[n].layout.display is None for n in ("dpo_margin", "dpo_accuracy"))
    assert not m.charts.dpo_margin_fig.layout.annotations[0].visible  # drawn, not waiting
    assert m.charts.figure_boxes["rewards"].layout.display == "none"  # GRPO's charts stay hidden
    m.attach(tmp_path / "s")
    m.wait_sync(10)
    assert not m.charts.dpo_margin_fig.data and not m.charts.dpo_accuracy_fig.data
    assert all(m.charts.figure_boxes[n].layout.display == "none" for n in ("dpo_margin", "dpo_accuracy"))


def test_a_monitor_before_any_run_shows_the_common_charts_only():
    """Before its first events a monitor does not know the run's method: GRPO's, DPO's and the task charts stay hidden
    (a new user launching an SFT run saw empty 'DPO rewards' and 'task pool' charts waiting)."""
    from workbench.ui.monitor_charts import METHOD_FIGURES

    boxes = RunMonitor().charts.figure_boxes
    assert set(METHOD_FIGURES) < set(boxes)
    assert {n: boxes[n].layout.display for n in METHOD_FIGURES} == dict.fromkeys(METHOD_FIGURES, "none")
    assert all(boxes[n].layout.display is None for n in ("loss", "grad_norm", "lr", "memory"))
