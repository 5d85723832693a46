"""RunState folds the event log into series without any widget (reusable by the CLI or extensions)."""
import sys

from workbench.events import Census, EventWriter, Overflow, RunFinished, RunStarted, Step
from workbench.ui.state import EventTail, RunState, Throttle, format_seconds, load_run_state


def step(n, loss=2.0, skipped=False, scale=None, rank=0, grad_norm=1.0):
    return Step(step=n, loss=loss, lr=1e-3, grad_norm=grad_norm, loss_scale=scale, skipped=skipped, tokens=10,
                tokens_per_s=100.0, step_time_s=0.1, eta_s=5.0, rank=rank)


def test_state_module_imports_no_widgets():
    import subprocess

    code = "import sys, workbench.ui.state; print('ipywidgets' in sys.modules, 'plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_folds_steps_overflows_census_and_end():
    s = RunState()
    s.apply([RunStarted(run_dir="r", config={"model": {"source": "m"}}, hardware={}, versions={},
                        precision={"mode": "fp16"}, total_steps=4)])
    assert s.status == "running" and s.total_steps == 4
    s.apply([Overflow(step=1, scale_before=65536.0, scale_after=32768.0, nonfinite_params=["a.lora_A"], nonfinite_count=1),
             step(1, skipped=True, scale=32768.0, grad_norm=float("inf")), step(2, loss=1.5, scale=32768.0),
             step(2, loss=9.9, rank=1)])  # other ranks repeat the global step: ignored
    assert s.loss.x == [1, 2] and s.loss.y == [2.0, 1.5]
    assert s.grad_norm.y == [None, 1.0]  # inf is not drawable
    assert s.skipped_steps == [1] and s.overflows[0]["scale_after"] == 32768.0
    assert s.alerts[-1].level == "warning" and "65536 -> 32768" in s.alerts[-1].detail
    s.apply([Census(step=2, rows=[{"group": "decoder", "dtype": "float16", "trainable": False, "count": 10, "bytes": 20},
                                  {"group": "lora", "dtype": "float32", "trainable": True, "count": 4, "bytes": 16}],
                    totals={"float16": 10, "float32": 4})])
    assert s.census_by_group() == {"float16": {"decoder": 10}, "float32": {"lora (trained)": 4}}
    assert s.progress == 0.5 and "ETA" in s.summary()
    s.apply([RunFinished(step=4, final_loss=1.0, adapter_path="r/adapter", wall_s=3.0)])
    assert s.done and s.status == "finished" and s.adapter_path == "r/adapter"


def test_unknown_and_diagnosis_events_are_handled_generically():
    s = RunState()
    v0 = s.version
    s.apply([{"type": "from_the_future", "step": 3, "share": 0.9}])
    assert s.version == v0 and s.unknown_types == {"from_the_future": 1}
    s.apply([{"type": "diagnosis", "step": 7, "cause": "loss-scale collapse", "fix": "use bf16",
              "module": "lm_head", "evidence": "12 skips in 50 steps"}])
    a = s.alerts[-1]
    assert a.level == "error" and a.kind == "diagnosis" and "collapse" in a.title
    assert "fix: use bf16" in a.detail and "module: lm_head" in a.detail and "evidence" in a.detail


def test_run_failed_and_memory_series():
    s = RunState()
    s.apply([{"type": "memory", "rank": 0, "step": 1, "devices": [{"device": "cuda:0", "allocated": 10, "reserved": 20,
                                                                   "peak": 15}], "host_rss": 100, "params_bytes": 1,
              "grads_bytes": 2, "optimizer_bytes": 3, "master_weights_bytes": 0}])
    assert set(s.memory_series) == {"cuda:0 allocated", "cuda:0 reserved", "cuda:0 peak", "rank0 host RSS"}
    assert s.memory_breakdown() == {"weights": 1, "gradients": 2, "optimizer_state": 3, "master_weights": 0}
    s.apply([{"type": "run_failed", "rank": 1, "step": 2, "error": "boom", "error_type": "RuntimeError"}])
    assert s.status == "failed" and "boom" in s.error and s.alerts[-1].level == "error"
    assert "resume_from" not in s.alerts[-1].detail  # nothing was saved: no resume advice
    s.apply([{"type": "run_failed", "rank": 0, "step": 3, "error": "Ctrl-C", "error_type": "KeyboardInterrupt",
              "checkpoint": "runs/r/checkpoints/step-0000003"}])
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
    from workbench.ui.state import RANK0_ONLY

    s = RunState()
    v0 = s.version
    assert s.apply([{"type": kind, "rank": 1, "step": 1, "loss": 1.0, "low_precision_share": 0.5}
                    for kind in sorted(RANK0_ONLY)]) == 0
    assert s.version == v0 and s.ranks == {1} and not s.unknown_types
    assert s.status == "idle" and not s.loss.x and not s.alerts and s.census is None and not s.coverage.x
    # per-rank events still count from any rank
    assert s.apply([{"type": "memory", "rank": 1, "step": 1, "host_rss": 5},
                    {"type": "coverage", "rank": 0, "step": 1, "low_precision_share": 0.5}]) == 2
    assert s.memory_series["rank1 host RSS"].y == [5] and s.coverage.y == [0.5] and s.ranks == {0, 1}
