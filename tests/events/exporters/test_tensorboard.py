"""The TensorBoard exporter, read back with tensorboard's own reader."""

from __future__ import annotations

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from workbench.events import read_events
from workbench.events.exporters import export_events
from workbench.events.exporters.tensorboard import TensorBoardExporter
from workbench.runs.layout import EVENTS_FILE

from .sample_logs import MiB


def scalars(logdir) -> dict[str, list[tuple[int, float, float]]]:
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})  # 0: keep every value
    acc.Reload()
    return {tag: [(s.step, s.value, s.wall_time) for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def f32(value: float) -> float:
    return float(np.float32(value))  # TensorBoard stores scalars as float32


def test_scalars_read_back_equal_to_the_events(fp16_run):
    result = export_events(fp16_run / EVENTS_FILE, "tensorboard")
    assert result.out_dir == fp16_run / "tensorboard" and result.events == 11
    got = scalars(result.out_dir)
    events, _ = read_events(fp16_run / "events.jsonl", typed=False)
    steps = [e for e in events if e["type"] == "step"]
    for field, tag in (
        ("loss", "train/loss"),
        ("lr", "train/lr"),
        ("loss_scale", "precision/loss_scale"),
        ("tokens_per_s", "train/tokens_per_s"),
    ):
        assert [(s, v) for s, v, _ in got[tag]] == [(e["step"], f32(e[field])) for e in steps], tag
    assert [w for _, _, w in got["train/loss"]] == [e["time"] for e in steps]
    # the skipped step's infinite grad norm is no point on the curve; the overflow count rises at step 2
    assert [(s, v) for s, v, _ in got["train/grad_norm"]] == [
        (e["step"], f32(e["grad_norm"])) for e in steps if e["step"] != 2
    ]
    assert [(s, v) for s, v, _ in got["precision/overflow_count"]] == [(1, 0.0), (2, 1.0), (3, 1.0), (4, 1.0)]
    assert [(s, v) for s, v, _ in got["eval/loss"]] == [(3, 1.25)]
    memory = [e for e in events if e["type"] == "memory" and e["rank"] == 0]
    assert [(s, v) for s, v, _ in got["memory/host_rss_mib"]] == [(e["step"], f32(e["host_rss"] / MiB)) for e in memory]
    assert [(s, v) for s, v, _ in got["memory/cuda:0/allocated_mib"]] == [(1, 100.0), (2, 200.0)]
    assert [(s, v) for s, v, _ in got["memory/cuda:0/peak_mib"]] == [(1, 150.0), (2, 300.0)]
    assert [(s, v) for s, v, _ in got["memory/optimizer_mib"]] == [(1, 4.0), (2, 4.0)]
    assert [(s, v) for s, v, _ in got["memory/rank1/cuda:0/reserved_mib"]] == [(1, 200.0)]


def test_a_second_export_replaces_the_first(fp16_run, tmp_path):
    out = tmp_path / "tb"
    export_events(fp16_run / EVENTS_FILE, TensorBoardExporter, out)
    export_events(fp16_run / EVENTS_FILE, TensorBoardExporter, out)
    assert len(list(out.glob("events.out.tfevents.*"))) == 1
    assert [s for s, _, _ in scalars(out)["train/loss"]] == [1, 2, 3, 4]
