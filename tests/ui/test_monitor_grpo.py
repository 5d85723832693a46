"""A GRPO run's events fold into reward curves per function, the mismatch chart (with the importance-sampling cap's
share), the task pool's success per family and a samples table; an SFT run shows none of them."""

from __future__ import annotations

from workbench.events.schema import PolicyMismatch, Rollout
from workbench.ui.monitor_charts import samples_html
from workbench.ui.monitor_panel import RunMonitor
from workbench.ui.run_log import load_run_state

from .run_logs import write_method_run

THUMBNAIL = "data:image/png;base64,iVBORw0KGgo="


def _events(n: int) -> list:
    return [
        Rollout(
            step=n,
            groups=2,
            group_size=4,
            reward_mean=0.5 * n,
            reward_std=0.1,
            rewards={
                "format": {"mean": 0.25 * n, "std": 0.1, "weight": 1.0},
                "tap_in_box": {"mean": 0.1 * n, "std": 0.1, "weight": 2.0},
            },
            all_equal_groups=0.5,
            completion_tokens_mean=12.0,
            completion_tokens_max=16,
            truncated=0.0,
            parse_rate=0.5,
            reference_kl=0.003 * n,
            task_pool={
                "families": {
                    "open_app": {"success": 0.5 * n, "weight": 0.5, "drawn": 1},
                    "send_message": {"success": None, "weight": 1.0, "drawn": 1},
                },
                "fresh": 0,
                "replayed": n - 1,
                "kept": n,
            },
            samples=[
                {
                    "prompt": "Turn on <Wi-Fi>",
                    "completion": "<think>go</think>",
                    "rewards": {"format": 1.0, "tap_in_box": 0.0},
                    "total": 1.0,
                    "advantage": 0.7,
                    "thumbnail": THUMBNAIL,
                }
            ],
        ),
        PolicyMismatch(
            step=n,
            tokens=40,
            mean_abs=0.01 * n,
            max_abs=0.2,
            ratio_min=0.9,
            ratio_max=1.1,
            ratio_std=0.02,
            kl=1e-4,
            clipped=0.0,
            precision="bf16",
            is_weight_mean=1.0,
            is_capped=0.01 * n,
        ),
    ]


def _write(run_dir, grpo: bool):
    write_method_run(run_dir, "grpo" if grpo else "sft", _events if grpo else lambda n: ())


def test_state_folds_rollouts_and_mismatch(tmp_path):
    _write(tmp_path / "g", grpo=True)

    s = load_run_state(tmp_path / "g")
    assert s.rewards["total"].y == [0.5, 1.0] and s.rewards["format"].y == [0.25, 0.5]
    assert s.mismatch["mean_abs"].y == [0.01, 0.02] and s.rollout_stats["parse_rate"].y == [0.5, 0.5]
    assert s.rollout_stats["reference_kl"].y == [0.003, 0.006]
    # rl.pool: each family's recent success (one not yet played has none), the replayed completions;
    # rl.importance_sampling: the share of tokens the cap changed
    assert {f: series.y for f, series in s.pool_success.items()} == {"open_app": [0.5, 1.0]}
    assert s.rollout_stats["replayed"].y == [0, 1] and s.mismatch["is_capped"].y == [0.01, 0.02]
    assert s.samples[0]["step"] == 2 and s.samples[0]["completion"] == "<think>go</think>"
    assert s.samples[0]["thumbnail"] == THUMBNAIL


def test_monitor_draws_reward_curves_mismatch_and_samples_for_grpo_only(tmp_path):
    _write(tmp_path / "g", grpo=True)
    _write(tmp_path / "s", grpo=False)
    m = RunMonitor()
    m.attach(tmp_path / "g")
    m.wait_sync(10)
    assert {t.name: list(t.y) for t in m.charts.reward_fig.data} == {
        "total": [0.5, 1.0],
        "format": [0.25, 0.5],
        "tap in box": [0.1, 0.2],
    }
    assert list(next(t for t in m.charts.mismatch_fig.data if t.name == "mean abs").y) == [0.01, 0.02]
    assert list(next(t for t in m.charts.mismatch_fig.data if t.name.startswith("share of tokens capped")).y) == [
        0.01,
        0.02,
    ]
    assert {t.name: list(t.y) for t in m.charts.pool_fig.data} == {"open app": [0.5, 1.0]}
    assert m.charts.figure_boxes["pool"].layout.display is None
    assert m.charts.figure_boxes["rewards"].layout.display is None and m.charts.samples_cell.layout.display is None
    assert (
        "&lt;think&gt;go&lt;/think&gt;" in m.charts.samples_table.value
        and "Turn on &lt;Wi-Fi&gt;" in m.charts.samples_table.value
    )
    assert f"<img src='{THUMBNAIL}'" in m.charts.samples_table.value
    m.attach(tmp_path / "s")
    m.wait_sync(10)
    assert not m.charts.reward_fig.data and m.charts.figure_boxes["rewards"].layout.display == "none"
    assert not m.charts.pool_fig.data and m.charts.figure_boxes["pool"].layout.display == "none"
    assert m.charts.samples_cell.layout.display == "none"


def test_the_samples_table_shows_a_screen_column_only_for_samples_with_a_thumbnail():
    text = {"prompt": "p", "completion": "c", "rewards": {"format": 1.0}, "total": 1.0, "advantage": 0.0, "step": 1}
    assert "<img" not in samples_html([text]) and "screen" not in samples_html([text])  # older logs, text prompts
    shown = samples_html([{**text, "thumbnail": THUMBNAIL}, text])
    assert "<th>screen</th>" in shown and shown.count("<img") == 1 and shown.count("<td></td>") == 1
    assert "<img" not in samples_html([{**text, "thumbnail": "javascript:alert(1)"}])  # only image data: URLs
