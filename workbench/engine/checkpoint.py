"""Resumable checkpoints: trained weights, optimizer, scaler, LR schedule, RNG and data position.

Written to a temporary directory and renamed into place, so a crash mid-save never leaves a
checkpoint that looks complete but is not.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..runs.checkpoints import (
    PREFIX,
    SHARDING_FILE,
    STATE_FILE,
    TRAINING_FILE,
    list_checkpoints,
    rng_file,
)


@dataclass
class TrainState:
    step: int  # optimizer steps completed
    micro_batches: int  # micro-batches consumed from the data stream
    tokens: int = 0  # target tokens trained on so far
    last_loss: float | None = None
    extra: dict = field(default_factory=dict)  # the method's own state (GRPO's task pool), JSON


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:
        pass  # without numpy there is no numpy RNG to restore
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])


def save_checkpoint(
    ckpt_root: Path,
    state: TrainState,
    strategy,
    scheduler,
    keep_last: int,
    rng: dict | None = None,
    alone: bool = False,
) -> Path:
    """Save the run at ``state.step`` through ``strategy``; every rank calls it. ``rng``: this rank's
    generators to resume with (default: now). ``alone``: rank 0 saves without its peers (an emergency
    save after a failure; only for strategies that ``can_save_alone``), with rank 0's RNG only."""
    ctx = strategy.ctx
    barrier = (lambda: None) if alone else ctx.barrier
    final = ckpt_root / f"{PREFIX}{state.step:07d}"
    tmp = ckpt_root / f".tmp-{final.name}"
    if ctx.is_main:
        ckpt_root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    barrier()
    strategy.save_state(tmp)
    torch.save(rng or rng_state(), rng_file(tmp, ctx.rank))
    if ctx.is_main:
        torch.save({"scheduler": scheduler.state_dict()}, tmp / TRAINING_FILE)
        (tmp / SHARDING_FILE).write_text(json.dumps({"strategy": strategy.name, "world_size": ctx.world_size}) + "\n")
        (tmp / STATE_FILE).write_text(json.dumps(asdict(state)) + "\n")
    barrier()
    if ctx.is_main:
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in list_checkpoints(ckpt_root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def load_checkpoint(path: Path, strategy, scheduler) -> TrainState:
    """Restore a checkpoint written by the same strategy (FSDP's also at another world size)."""
    ctx = strategy.ctx
    meta_file = path / SHARDING_FILE
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {"strategy": "none", "world_size": 1}
    if meta["strategy"] != strategy.name:
        raise ValueError(
            f"{path} was written by strategy {meta['strategy']}, this run uses {strategy.name}: resume "
            "with the same strategy"
        )
    if meta["world_size"] != ctx.world_size and not strategy.can_reshard:
        from ..distributed.strategies import STRATEGIES

        resharding = ", ".join(name for name, kind in STRATEGIES.items() if kind.can_reshard)
        raise ValueError(
            f"{path} was written by {meta['world_size']} ranks, this run has {ctx.world_size}: "
            f"{strategy.name} checkpoints do not reshard to another world size (only {resharding} "
            "checkpoints do): resume with the same number of processes"
        )
    strategy.load_state(path)
    training = torch.load(path / TRAINING_FILE, weights_only=False)
    scheduler.load_state_dict(training["scheduler"])
    rng = rng_file(path, ctx.rank)
    if rng.is_file():
        set_rng_state(torch.load(rng, weights_only=False))
    elif "rng" in training:  # a one-process checkpoint of the older layout
        set_rng_state(training["rng"])
    # else: a rank the checkpoint has no RNG for (resharded FSDP, a DDP emergency save) keeps its fresh RNG
    return TrainState(**json.loads((path / STATE_FILE).read_text()))
