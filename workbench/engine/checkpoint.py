"""Resumable checkpoints: trained weights, optimizer, scaler, LR schedule, RNG and data position.

Written to a temporary directory and renamed into place, so a crash mid-save never leaves a
checkpoint that looks complete but is not.
"""
from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import torch
from safetensors.torch import load_file

PREFIX = "step-"


@dataclass
class TrainState:
    step: int  # optimizer steps completed
    micro_batches: int  # micro-batches consumed from the data stream
    tokens: int = 0  # target tokens trained on so far
    last_loss: Optional[float] = None


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:
        pass
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().contiguous() for n, p in model.named_parameters() if p.requires_grad}


# ---- the checkpoint directory ----------------------------------------------------------------------
# One directory per step, for every strategy (one process is a world of one):
#   state.json        TrainState (step, data position, ...)                       rank 0
#   sharding.json     {"strategy", "world_size"} that wrote it                      rank 0
#   training.pt       {"scheduler": ...}                                            rank 0
#   rng-rankNNNNN.pt  the generators of each rank                                   each rank
#   + the strategy's own files (Strategy.save_state): trainable.safetensors + optimizer.pt for one
#     process and DDP, DCP shards for FSDP, DeepSpeed's checkpoint for DeepSpeed.
# It is written to a temporary directory that rank 0 renames into place after every rank finished,
# so a crash mid-save never leaves a checkpoint that looks complete but is not.
# One-process checkpoints written before this layout (no sharding.json; optimizer, scaler and RNG
# inside training.pt) still load.
TRAINABLE_FILE = "trainable.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
SHARDING_FILE = "sharding.json"


def _rng_file(directory: Path, rank: int) -> Path:
    return directory / f"rng-rank{rank:05d}.pt"


def optimizer_file(directory: Path) -> Path:
    """Where a one-process/DDP checkpoint keeps the optimizer and scaler (older ones: training.pt)."""
    path = directory / OPTIMIZER_FILE
    return path if path.is_file() else directory / "training.pt"


def save_checkpoint(ckpt_root: Path, state: TrainState, strategy, scheduler, keep_last: int,
                    rng: Optional[dict] = None, alone: bool = False) -> Path:
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
    torch.save(rng or rng_state(), _rng_file(tmp, ctx.rank))
    if ctx.is_main:
        torch.save({"scheduler": scheduler.state_dict()}, tmp / "training.pt")
        (tmp / SHARDING_FILE).write_text(json.dumps({"strategy": strategy.name, "world_size": ctx.world_size}) + "\n")
        (tmp / "state.json").write_text(json.dumps(asdict(state)) + "\n")
    barrier()
    if ctx.is_main:
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in list_checkpoints(ckpt_root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def list_checkpoints(ckpt_root: Path) -> list[Path]:
    if not ckpt_root.is_dir():
        return []
    return sorted(p for p in ckpt_root.iterdir() if p.name.startswith(PREFIX) and (p / "state.json").is_file())


def load_trainable_weights(path: Path, model) -> None:
    """Copy ``path/trainable.safetensors`` into the model's parameters of the same names."""
    weights = load_file(str(path / TRAINABLE_FILE))
    params = dict(model.named_parameters())
    missing = [n for n in weights if n not in params]
    if missing:
        raise ValueError(f"checkpoint {path} holds weights this model lacks ({missing[:3]}...): the model or LoRA "
                         "settings differ from the run that wrote it")
    with torch.no_grad():
        for n, t in weights.items():
            params[n].copy_(t)


def load_checkpoint(path: Path, strategy, scheduler) -> TrainState:
    """Restore a checkpoint written by the same strategy (FSDP's also at another world size)."""
    ctx = strategy.ctx
    meta_file = path / SHARDING_FILE
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {"strategy": "none", "world_size": 1}
    if meta["strategy"] != strategy.name:
        raise ValueError(f"{path} was written by strategy {meta['strategy']}, this run uses {strategy.name}: resume "
                         "with the same strategy")
    if meta["world_size"] != ctx.world_size and strategy.name != "fsdp":
        raise ValueError(f"{path} was written by {meta['world_size']} ranks, this run has {ctx.world_size}: only FSDP "
                         "checkpoints reshard to another world size")
    strategy.load_state(path)
    training = torch.load(path / "training.pt", weights_only=False)
    scheduler.load_state_dict(training["scheduler"])
    rng = _rng_file(path, ctx.rank)
    if rng.is_file():
        set_rng_state(torch.load(rng, weights_only=False))
    elif "rng" in training:  # a one-process checkpoint of the older layout
        set_rng_state(training["rng"])
    # else: a rank the checkpoint has no RNG for (resharded FSDP, a DDP emergency save) keeps its fresh RNG
    return TrainState(**json.loads((path / "state.json").read_text()))
