"""RunState folds the event log into series without any widget (reusable by the CLI or extensions)."""

import sys

from workbench.events import Census, EventWriter, Overflow, RunFinished, RunStarted, Step
from workbench.ui.run_log import EventTail, load_run_state
from workbench.ui.run_state import RunState, format_seconds
from workbench.ui.view_helpers import Throttle


def step(n, loss=2.0, skipped=False, scale=None, rank=0, grad_norm=1.0):
    return Step(
        step=n,
        loss=loss,
        lr=1e-3,
        grad_norm=grad_norm,
        loss_scale=scale,
        skipped=skipped,
        tokens=10,
        tokens_per_s=100.0,
        step_time_s=0.1,
        eta_s=5.0,
        rank=rank,
    )


def test_state_module_imports_no_widgets():
    import subprocess

    code = "import sys, workbench.ui.run_log; print('ipywidgets' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_folds_steps_overflows_census_and_end():
    s = RunState()
    s.apply(
        [
            RunStarted(
                run_dir="r",
                config={"model": {"source": "m"}},
                hardware={},
                versions={},
                precision={"mode": "fp16"},
                total_steps=4,
            )
        ]
    )
    assert s.status == "running" and s.total_steps == 4
    s.apply(
        [
            Overflow(
                step=1, scale_before=65536.0, scale_after=32768.0, nonfinite_params=["a.lora_A"], nonfinite_count=1
            ),
            step(1, skipped=True, scale=32768.0, grad_norm=float("inf")),
            step(2, loss=1.5, scale=32768.0),
            step(2, loss=9.9, rank=1),
        ]
    )  # other ranks repeat the global step: ignored
    assert s.loss.x == [1, 2] and s.loss.y == [2.0, 1.5]
    assert s.grad_norm.y == [None, 1.0]  # inf is not drawable
    assert s.skipped_steps == [1] and s.overflows[0]["scale_after"] == 32768.0
    assert s.alerts[-1].level == "warning" and "65536 -> 32768" in s.alerts[-1].detail
    s.apply(
        [
            Census(
                step=2,
                rows=[
                    {"group": "decoder", "dtype": "float16", "trainable": False, "count": 10, "bytes": 20},
                    {"group": "lora", "dtype": "float32", "trainable": True, "count": 4, "bytes": 16},
                ],
                totals={"float16": 10, "float32": 4},
            )
        ]
    )
    assert s.census_by_group() == {"float16": {"decoder": 10}, "float32": {"lora (trained)": 4}}
    assert s.progress == 0.5 and "ETA" in s.summary()
    s.apply([RunFinished(step=4, final_loss=1.0, adapter_path="r/adapter", wall_s=3.0)])
    assert s.done and s.status == "finished" and s.adapter_path == "r/adapter"


def test_unknown_and_diagnosis_events_are_handled_generically():
    s = RunState()
    v0 = s.version
    s.apply([{"type": "from_the_future", "step": 3, "share": 0.9}])
    assert s.version == v0 and s.unknown_types == {"from_the_future": 1}
    s.apply(
        [
            {
                "type": "diagnosis",
                "step": 7,
                "cause": "loss-scale collapse",
                "fix": "use bf16",
                "module": "lm_head",
                "evidence": "12 skips in 50 steps",
            }
        ]
    )
    a = s.alerts[-1]
    assert a.level == "error" and a.kind == "diagnosis" and "collapse" in a.title
    assert "fix: use bf16" in a.detail and "module: lm_head" in a.detail and "evidence" in a.detail


def test_run_failed_and_memory_series():
    s = RunState()
    s.apply(
        [
            {
                "type": "memory",
                "rank": 0,
                "step": 1,
                "devices": [{"device": "cuda:0", "allocated": 10, "reserved": 20, "peak": 15}],
                "host_rss": 100,
                "params_bytes": 1,
                "grads_bytes": 2,
                "optimizer_bytes": 3,
                "master_weights_bytes": 0,
            }
        ]
    )
    assert set(s.memory_series) == {"cuda:0 allocated", "cuda:0 reserved", "cuda:0 peak", "rank0 host RSS"}
    assert s.memory_breakdown() == {"weights": 1, "gradients": 2, "optimizer_state": 3, "master_weights": 0}
    s.apply([{"type": "run_failed", "rank": 1, "step": 2, "error": "boom", "error_type": "RuntimeError"}])
    assert s.status == "failed" and "boom" in s.error and s.alerts[-1].level == "error"
    assert "resume_from" not in s.alerts[-1].detail  # nothing was saved: no resume advice
    s.apply(
        [
            {
                "type": "run_failed",
                "rank": 0,
                "step": 3,
                "error": "Ctrl-C",
                "error_type": "KeyboardInterrupt",
                "checkpoint": "runs/r/checkpoints/step-0000003",
            }
        ]
    )
    assert "checkpointing.resume_from=runs/r/checkpoints/step-0000003" in s.alerts[-1].detail


def test_event_tail_reads_incrementally(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = EventTail(path)
    assert tail.poll() == []
    with EventWriter(path) as w:
        w.emit(step(1))
        assert [e.step for e in tail.poll()] == [1]
        w.emit(step(2))
        w.emit(step(3))
    assert [e.step for e in tail.poll()] == [2, 3] and tail.poll() == []
    state = load_run_state(tmp_path)
    assert state.loss.x == [1, 2, 3] and not state.pending_step_times


def test_throttle_and_format():
    t = [0.0]
    th = Throttle(0.25, clock=lambda: t[0])
    assert th.ready() and not th.ready()
    t[0] = 0.3
    assert th.ready()
    assert format_seconds(75) == "1:15" and format_seconds(3725) == "1:02:05" and format_seconds(None) == "?"


def test_other_ranks_copies_of_rank0_only_events_change_nothing():
    from workbench.ui.run_state import RANK0_ONLY

    s = RunState()
    v0 = s.version
    assert (
        s.apply(
            [
                {"type": kind, "rank": 1, "step": 1, "loss": 1.0, "low_precision_share": 0.5}
                for kind in sorted(RANK0_ONLY)
            ]
        )
        == 0
    )
    assert s.version == v0 and s.ranks == {1} and not s.unknown_types
    assert s.status == "idle" and not s.loss.x and not s.alerts and s.census is None and not s.coverage.x
    # per-rank events still count from any rank
    assert (
        s.apply(
            [
                {"type": "memory", "rank": 1, "step": 1, "host_rss": 5},
                {"type": "coverage", "rank": 0, "step": 1, "low_precision_share": 0.5},
            ]
        )
        == 2
    )
    assert s.memory_series["rank1 host RSS"].y == [5] and s.coverage.y == [0.5] and s.ranks == {0, 1}


# ---- long runs: bounded series, markers kept, following == reading at the end (issue 25) ----------------------

from workbench.bench.long_run import OVERFLOW_EVERY, write_log  # noqa: E402
from workbench.ui.run_state import CHART_POINTS, RECENT_STEPS, Series  # noqa: E402


def test_a_series_stays_bounded_and_its_newest_steps_exact():
    s = Series(limit=100, recent=50)
    for step in range(1, 20_001):
        s.add(step, float(step))
    assert len(s) <= 100 + 50 + 1 and s.seen == 20_000
    assert s.x[-50:] == list(range(19_951, 20_001)) and s.y[-1] == 20_000.0  # the newest exactly
    assert s.x[0] == 1 and s.x == sorted(s.x)  # the whole run is spanned, in order
    older = s.x[1:-50]  # after the first step, one point every `stride` steps
    assert {b - a for a, b in zip(older, older[1:])} == {s.stride} and s.stride == 256
    unbounded = Series(limit=None)
    for step in range(1, 5001):
        unbounded.add(step, 0.0)
    assert len(unbounded) == 5000


def test_a_series_does_not_depend_on_how_its_points_were_batched():
    import random

    whole, chunked = Series(limit=64, recent=20), Series(limit=64, recent=20)
    points = [(step, step * 0.5) for step in range(1, 5000) if step % 7]  # irregular steps
    for x, y in points:
        whole.add(x, y)
    rng, i = random.Random(0), 0
    while i < len(points):
        n = rng.randint(1, 300)
        for x, y in points[i : i + n]:
            chunked.add(x, y)
        i += n
    assert (chunked.x, chunked.y, chunked.stride) == (whole.x, whole.y, whole.stride)


def test_a_resumed_run_replaces_the_steps_it_logs_again():
    s = Series(limit=None)
    t = Series(limit=50, recent=10)
    for series in (s, t):
        for step in [*range(1, 31), *range(21, 41)]:  # failed at 30, resumed from the checkpoint of step 20
            series.add(step, float(step))
    assert t.x[-10:] == list(range(31, 41)) and t.x == sorted(t.x) and len(set(t.x)) == len(t.x)


def _steps_state(path):
    state, tail = RunState(), EventTail(path, typed=False)
    state.apply(tail.poll())
    return state, tail


def test_following_a_long_run_equals_reading_it_at_the_end_and_keeps_every_marker(tmp_path):
    run = tmp_path / "long"
    write_log(run, 3000, total_steps=20_000)
    follower, tail = _steps_state(run / "events.jsonl")
    for start in range(3001, 12_001, 1500):  # the run goes on; the follower reads what was appended
        write_log(run, 1500, start=start)
        follower.apply(tail.poll())
    whole = load_run_state(run)
    for name in ("loss", "lr", "grad_norm", "loss_scale"):
        a, b = getattr(follower, name), getattr(whole, name)
        assert (a.x, a.y) == (b.x, b.y), name
        assert len(a) <= CHART_POINTS + RECENT_STEPS + 1 and a.x[-1] == 12_000
    assert follower.memory_series.keys() == whole.memory_series.keys()
    assert all(follower.memory_series[k].x == whole.memory_series[k].x for k in whole.memory_series)
    # every overflow, skipped step and diagnosis of the run, thinned region included
    expected = [s for s in range(1, 12_001) if s % OVERFLOW_EVERY == 0]
    assert [o["step"] for o in whole.overflows] == expected == whole.skipped_steps == follower.skipped_steps
    assert [a.step for a in whole.alerts if a.kind == "overflow"] == expected
    assert len(whole.loss) < 12_000 and all(s in whole.loss.x or s < 11_500 for s in expected)


def test_diagnosis_alerts_are_never_thinned(tmp_path):
    run = tmp_path / "long"
    from workbench.events import EventWriter
    from workbench.events.schema import Diagnosis

    write_log(run, 6000)
    with EventWriter(run / "events.jsonl") as w:
        w.emit(
            Diagnosis(step=17, kind="scale_collapse", cause="loss scale fell", fix="precision.mode=bf16", module=None)
        )
    state = RunState(loss=Series(limit=100, recent=10))
    state.apply(EventTail(run / "events.jsonl", typed=False).poll())
    assert len(state.loss) <= 111 and 17 not in state.loss.x
    assert [a.step for a in state.alerts if a.kind == "diagnosis"] == [17]


def test_catching_up_on_a_long_log_equals_folding_every_event(tmp_path):
    from workbench.ui.run_log import catch_up

    run = tmp_path / "long"
    write_log(run, 9000, total_steps=20_000)
    log = run / "events.jsonl"
    with open(log, "ab") as fh:
        fh.write(b'{"type": "step", "rank": 0, "step": 9001')  # a line being written: left for the next poll
    slow, slow_tail = _steps_state(log)
    fast, fast_tail = RunState(), EventTail(log, typed=False)
    assert catch_up(fast, fast_tail) == len(read_events_of(log)) and fast_tail.offset == slow_tail.offset
    for name in ("loss", "lr", "grad_norm", "loss_scale"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert (a.x, a.y, a.stride, a.seen) == (b.x, b.y, b.stride, b.seen), name
    assert (fast.step, fast.skipped_steps, fast.overflows, fast.eta_s) == (
        slow.step,
        slow.skipped_steps,
        slow.overflows,
        slow.eta_s,
    )
    assert [m.x for m in fast.memory_series.values()] == [m.x for m in slow.memory_series.values()]
    assert len(fast.loss) < 9000 and fast.loss.stride > 1
    data = log.read_bytes()
    log.write_bytes(data[: data.rfind(b"\n") + 1])  # (the partial line never completes)
    write_log(run, 700, start=9001)
    for state, tail in ((fast, fast_tail), (slow, slow_tail)):  # and both go on alike
        state.apply(tail.poll())
    assert (fast.loss.x, fast.loss.y) == (slow.loss.x, slow.loss.y) and fast.step == 9700


def read_events_of(log):
    from workbench.events import read_events

    return read_events(log, 0, typed=False)[0]
