import os
import signal
import time

from workbench.runs import attach
from workbench.training import launch, train_to_end


def _wait_for(pred, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_launch_runs_in_its_own_process_and_finishes(make_cfg):
    handle = launch(make_cfg(**{"schedule.max_steps": 3}))
    assert handle.pid != os.getpid()
    assert handle.wait(timeout=300) == "finished"
    events, _ = handle.events()
    assert events[0].type == "run_started" and events[-1].type == "run_finished"
    assert attach(handle.run_dir).status() == "finished"  # a fresh handle reads the same state


def test_train_to_end_trains_in_a_worker_with_the_threads_asked_for(make_cfg):
    """The bench's way to train: the caller keeps none of the run's memory (a GRPO run trained in the bench's process
    left 12 GB there, and the bench was killed for memory when its baseline's two ranks started)."""
    run_dir, status = train_to_end(make_cfg(**{"schedule.max_steps": 2}), threads=1)
    assert status == "finished"
    assert int((run_dir / "worker.pid").read_text()) != os.getpid()
    started = next(e for e in attach(run_dir).events()[0] if e.type == "run_started")
    assert started.hardware["torch_threads"] == 1


def _no_worker_left(handle) -> None:
    """A 100,000-step worker must not outlive its test (a failed assertion included): kill its process group."""
    try:
        os.killpg(handle.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it ended, as it should have


def test_stop_saves_a_checkpoint_and_reports_stopped(make_cfg):
    handle = launch(make_cfg(**{"schedule.max_steps": 100000}))
    try:
        assert _wait_for(lambda: any(e.type == "step" for e in handle.events()[0]))
        assert handle.stop(timeout=120) == "stopped"
    finally:
        _no_worker_left(handle)
    events, _ = handle.events()
    end = events[-1]
    assert end.type == "run_finished" and end.stopped and end.stop_reason == "stop requested"
    assert any(e.type == "checkpoint" and e.kind == "resumable" for e in events)


def test_a_killed_worker_is_reported_failed(make_cfg):
    handle = launch(make_cfg(**{"schedule.max_steps": 100000}))
    try:
        assert _wait_for(lambda: any(e.type == "step" for e in handle.events()[0]))
        os.killpg(handle.pid, signal.SIGKILL)
        assert handle.wait(timeout=60) == "failed"
    finally:
        _no_worker_left(handle)
    end = handle.events()[0][-1]
    assert end.type == "run_failed" and end.error_type == "WorkerDied" and "code -9" in end.error


def test_a_distributed_run_of_a_hub_model_downloads_it_once_before_its_ranks(monkeypatch, tmp_path):
    """The launcher fetches a hub model into the cache once; its ranks read the cache offline (no second download,
    no two ranks racing); a local directory or a model built from code fetches nothing."""
    from workbench.config import apply_overrides, config_from_dict
    from workbench.training import ranks_env

    def load_config(_, overrides, checks):
        return config_from_dict(apply_overrides({}, overrides), checks=checks)

    fetched = []
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda repo_id, **kw: fetched.append(repo_id))
    two = {"sharding.strategy": "ddp", "sharding.nproc_per_node": 2, "device": "cpu"}
    assert ranks_env(load_config(None, {"model.source": "autoglm-phone-9b", **two}, checks=False)) == {
        "HF_HUB_OFFLINE": "1"
    }
    assert fetched == ["zai-org/AutoGLM-Phone-9B"]
    local = tmp_path / "AutoGLM-Phone-9B"
    local.mkdir()
    (local / "config.json").write_text("{}")
    for source in (str(local), "tiny-glm4v"):
        assert ranks_env(load_config(None, {"model.source": source, **two}, checks=False)) == {}
    assert ranks_env(load_config(None, {"model.source": "autoglm-phone-9b"}, checks=False)) == {}  # one process
    assert fetched == ["zai-org/AutoGLM-Phone-9B"]
