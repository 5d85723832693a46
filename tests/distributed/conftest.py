"""Two gloo processes on the CPU training tiny-GLM-4: helpers shared by the distributed tests."""

from __future__ import annotations

import pytest

from tests.conftest import tiny_run_overrides

WORLD = 2
# One process sees micro-batches of PER_RANK x WORLD examples; each of the 2 ranks takes PER_RANK of them.
PER_RANK = 2


# What the two-process tests change in the shared tiny run: shorter rows, more steps with accumulation and
# warmup, no dropout (so that strategies can be compared exactly), no diagnosis instruments.
DISTRIBUTED = {
    "data.max_length": 64,
    "schedule.max_steps": 10,
    "schedule.micro_batch_size": PER_RANK,
    "schedule.grad_accum_steps": 2,
    "schedule.warmup_steps": 2,
    "lora.dropout": 0.0,
    "device": "cpu",
    "diagnosis.enabled": False,
}


def base_overrides(runs_dir, **extra) -> dict:
    return tiny_run_overrides(runs_dir, **{**DISTRIBUTED, **extra})


def make_config(runs_dir, **extra):
    from workbench.config import load_config

    return load_config(None, base_overrides(runs_dir, **extra))


def events_of(run_dir, kind=None, rank=None):
    from workbench.events import iter_events

    out = [e for e in iter_events(run_dir / "events.jsonl")]
    if kind:
        out = [e for e in out if getattr(e, "type", None) == kind]
    if rank is not None:
        out = [e for e in out if getattr(e, "rank", None) == rank]
    return out


def launch_and_wait(cfg, timeout=300):
    from workbench.training import launch

    handle = launch(cfg)
    status = handle.wait(timeout)
    if status != "finished":
        log = (handle.run_dir / "worker.log").read_text(errors="replace")[-4000:]
        failed = events_of(handle.run_dir, "run_failed")
        pytest.fail(f"{cfg.sharding.strategy} run {status}: {failed[-1].error if failed else ''}\n{log}")
    return handle.run_dir


def step_losses(run_dir) -> list[float]:
    return [e.loss for e in events_of(run_dir, "step")]
