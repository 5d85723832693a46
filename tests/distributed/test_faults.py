"""A rank that dies ends the whole run with run_failed naming it, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import time

import psutil

from .conftest import WORLD, events_of, make_config


def _ranks(launcher_pid: int) -> dict[int, psutil.Process]:
    """Worker processes under the launcher, by their RANK."""
    out = {}
    for p in psutil.Process(launcher_pid).children(recursive=True):
        try:
            if "workbench.training" in " ".join(p.cmdline()):
                out[int(p.environ()["RANK"])] = p
        except (psutil.NoSuchProcess, KeyError):
            continue
    return out


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_killing_one_rank_fails_the_run_naming_it(tmp_path):
    from workbench.training import launch

    cfg = make_config(
        tmp_path,
        **{
            "sharding.strategy": "fsdp",
            "sharding.nproc_per_node": WORLD,
            "schedule.max_steps": 10_000,
            "output.run_name": "victim",
        },
    )
    handle = launch(cfg)
    try:
        ranks = _wait_for(lambda: _ranks(handle.pid) if len(_ranks(handle.pid)) == WORLD else None, 120, "both ranks")
        _wait_for(lambda: len(events_of(handle.run_dir, "step")) >= 2, 180, "two optimizer steps")
        every = [psutil.Process(handle.pid), *psutil.Process(handle.pid).children(recursive=True)]
        os.kill(ranks[1].pid, signal.SIGKILL)
        assert handle.wait(120) == "failed"
    finally:
        if handle.is_running():
            os.killpg(handle.pid, signal.SIGKILL)
    failed = events_of(handle.run_dir, "run_failed")
    assert len(failed) == 1, [f.error for f in failed]
    assert failed[0].rank == 1 and failed[0].error_type == "RankKilled"
    assert "rank 1" in failed[0].error and "SIGKILL" in failed[0].error
    assert failed[0].step >= 2
    assert not events_of(handle.run_dir, "run_finished")
    # Nothing left: not the launcher, not the surviving rank, nor anything they started.
    gone = _wait_for(
        lambda: all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in every),
        30,
        "every process of the run to exit",
    )
    assert gone
    leftovers = [
        p for p in psutil.process_iter(["cmdline"]) if str(handle.run_dir) in " ".join(p.info["cmdline"] or [])
    ]
    assert not leftovers, leftovers
