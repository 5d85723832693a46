"""Two gloo processes on the CPU training tiny-GLM-4: helpers shared by the distributed tests."""
from __future__ import annotations

import pytest

from tests.conftest import SAMPLES

WORLD = 2
# One process sees micro-batches of PER_RANK x WORLD examples; each of the 2 ranks takes PER_RANK of them.
PER_RANK = 2


def base_overrides(runs_dir, **extra) -> dict:
    base = {
        "model.source": "tiny-glm4",
        "data.train": str(SAMPLES / "identity" / "train.jsonl"),
        "data.eval": None,
        "data.max_length": 64,
        "schedule.max_steps": 10,
        "schedule.micro_batch_size": PER_RANK,
        "schedule.grad_accum_steps": 2,
        "schedule.learning_rate": 3e-3,
        "schedule.warmup_steps": 2,
        "schedule.eval_every": 0,
        "lora.dropout": 0.0,
        "precision.mode": "fp32",
        "output.runs_dir": str(runs_dir),
        "output.progress_bar": False,
        "device": "cpu",
        "diagnosis.enabled": False,
    }
    base.update(extra)
    return base


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
    from workbench.engine import launch

    handle = launch(cfg)
    status = handle.wait(timeout)
    if status != "finished":
        log = (handle.run_dir / "worker.log").read_text(errors="replace")[-4000:]
        failed = events_of(handle.run_dir, "run_failed")
        pytest.fail(f"{cfg.sharding.strategy} run {status}: {failed[-1].error if failed else ''}\n{log}")
    return handle.run_dir


def step_losses(run_dir) -> list[float]:
    return [e.loss for e in events_of(run_dir, "step")]
