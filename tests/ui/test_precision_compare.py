"""The compare view of GRPO runs of the same seed under fp32 / bf16 / fp16: each run's log folded into its
mismatch and reward series, labelled by precision, the settings that differ said, runs still going followed; the
state imports no widget, the view overlays the runs in plotly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workbench.events import EventWriter, RunStarted
from workbench.events.schema import PolicyMismatch, Rollout
from workbench.ui.precision_compare import PrecisionCompare

from .run_logs import step_event

MISMATCH = {"fp32": 1e-6, "bf16": 2e-2, "fp16": 2.5e-3}


def config(mode: str, seed: int = 0, scale_rewards: str = "group") -> dict:
    return {
        "seed": seed,
        "model": {"source": "tiny-glm4v-agent"},
        "precision": {"mode": mode},
        "training": {"method": "grpo"},
        "rl": {"prompts": "phone_tasks", "rewards": {"episode_success": 1.0}, "scale_rewards": scale_rewards},
    }


def write_run(run_dir, mode: str, steps=(1, 2), seed: int = 0, writer=None, **settings):
    run_dir.mkdir(parents=True, exist_ok=True)
    w = writer or EventWriter(run_dir / "events.jsonl")
    if writer is None:
        w.emit(
            RunStarted(
                run_dir=str(run_dir),
                config=config(mode, seed, **settings),
                hardware={},
                versions={},
                precision={"mode": mode},
                total_steps=3,
            )
        )
    for n in steps:
        w.emit(step_event(n, loss=0.1))
        w.emit(
            Rollout(
                step=n,
                groups=2,
                group_size=4,
                reward_mean=0.1 * n + (0.05 if mode == "fp16" else 0),
                reward_std=0.1,
                rewards={"episode_success": {"mean": 0.1 * n, "std": 0.1, "weight": 1.0}},
                all_equal_groups=0.5,
                completion_tokens_mean=12.0,
                completion_tokens_max=16,
                truncated=0.0,
                parse_rate=0.5,
                samples=[],
            )
        )
        w.emit(
            PolicyMismatch(
                step=n,
                tokens=40,
                mean_abs=MISMATCH[mode] * n,
                max_abs=0.2,
                ratio_min=0.9,
                ratio_max=1.1,
                ratio_std=0.02,
                kl=MISMATCH[mode] ** 2,
                clipped=0.0,
                precision=mode,
            )
        )
    return w


def test_runs_are_labelled_by_precision_and_their_series_overlaid(tmp_path):
    for mode in MISMATCH:
        write_run(tmp_path / f"mm-{mode}", mode).close()
    c = PrecisionCompare([tmp_path / f"mm-{m}" for m in MISMATCH])
    assert [r.label for r in c.runs] == ["fp32", "bf16", "fp16"]
    mismatch = c.series("mismatch")
    assert mismatch["bf16"] == ([1, 2], [0.02, 0.04]) and mismatch["fp32"][1] == [1e-6, 2e-6]
    assert c.series("reward")["fp16"][1] == pytest.approx([0.15, 0.25])
    assert c.differences() == []  # the same seed and settings: the runs differ in precision only
    rows = {r["run"]: r for r in c.summary()}
    assert rows["bf16"]["mismatch"] == pytest.approx(0.03) and rows["fp32"]["steps"] == 2


def test_a_different_seed_is_said_and_a_running_run_is_followed(tmp_path):
    a = write_run(tmp_path / "a", "bf16", steps=(1,))
    write_run(tmp_path / "b", "fp16", seed=7).close()
    c = PrecisionCompare([tmp_path / "a", tmp_path / "b"], labels=["bf16 run", "fp16 run"])
    assert c.differences() == ["seed differs: bf16 run 0, fp16 run 7"]
    assert c.series("mismatch")["bf16 run"][0] == [1]
    write_run(tmp_path / "a", "bf16", steps=(2,), writer=a)  # the run goes on
    a.close()
    assert c.refresh() > 0 and c.series("mismatch")["bf16 run"][0] == [1, 2]


def test_a_different_advantage_scale_is_said(tmp_path):
    # rl.scale_rewards changes every advantage's size: the reward and mismatch curves would differ by it, not by precision
    write_run(tmp_path / "a", "bf16").close()
    write_run(tmp_path / "b", "fp16", scale_rewards="none").close()
    c = PrecisionCompare([tmp_path / "a", tmp_path / "b"])
    assert c.differences() == ["rl.scale_rewards differs: bf16 'group', fp16 'none'"]


def test_what_cannot_be_compared_says_so(tmp_path):
    with pytest.raises(ValueError, match="no events.jsonl"):
        PrecisionCompare([tmp_path])
    write_run(tmp_path / "a", "fp32").close()
    with pytest.raises(ValueError, match="one label per run"):
        PrecisionCompare([tmp_path / "a"], labels=["x", "y"])
    with pytest.raises(ValueError, match="unknown metric 'loss'"):
        PrecisionCompare([tmp_path / "a"]).series("loss")


def test_the_state_imports_no_widget():
    code = "import sys, workbench.ui.precision_compare; print('ipywidgets' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_the_view_draws_one_trace_per_run_in_each_panel_on_a_log_scale(tmp_path):
    from workbench.ui.precision_compare_panel import PrecisionCompareView, figure

    for mode in MISMATCH:
        write_run(tmp_path / mode, mode, steps=(1,)).close()
    c = PrecisionCompare([tmp_path / m for m in MISMATCH])
    fig = figure(c)
    assert len(fig.data) == 9 and {t.name for t in fig.data} == set(MISMATCH)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis3.type != "log"  # the mismatch logged, rewards not
    view = PrecisionCompareView([tmp_path / m for m in MISMATCH])
    assert "differ in precision only" in view.summary.value
    w = EventWriter(tmp_path / "bf16" / "events.jsonl")
    write_run(tmp_path / "bf16", "bf16", steps=(2,), writer=w)
    w.close()
    view.refresh()
    bf16 = [t for t in view.chart.data if t.name == "bf16"]
    assert len(view.chart.data) == 9 and list(bf16[0].x) == [1, 2] and bf16[2].xaxis == "x3"
