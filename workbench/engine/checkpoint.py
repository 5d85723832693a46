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
from safetensors.torch import load_file, save_file

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


def save_checkpoint(ckpt_root: Path, state: TrainState, model, optimizer, scheduler, scaler, keep_last: int,
                    rng: Optional[dict] = None) -> Path:
    """Save the run at ``state.step``. ``rng``: the generators' state to resume with (default: now)."""
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = ckpt_root / f"{PREFIX}{state.step:07d}"
    tmp = ckpt_root / f".tmp-{final.name}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_file(trainable_state(model), str(tmp / "trainable.safetensors"))
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None, "rng": rng or rng_state()}, tmp / "training.pt")
    (tmp / "state.json").write_text(json.dumps(asdict(state)) + "\n")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    for old in list_checkpoints(ckpt_root)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(ckpt_root: Path) -> list[Path]:
    if not ckpt_root.is_dir():
        return []
    return sorted(p for p in ckpt_root.iterdir() if p.name.startswith(PREFIX) and (p / "state.json").is_file())


def load_trainable_weights(path: Path, model) -> None:
    """Copy ``path/trainable.safetensors`` into the model's parameters of the same names."""
    weights = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = [n for n in weights if n not in params]
    if missing:
        raise ValueError(f"checkpoint {path} holds weights this model lacks ({missing[:3]}...): the model or LoRA "
                         "settings differ from the run that wrote it")
    with torch.no_grad():
        for n, t in weights.items():
            params[n].copy_(t)


def load_checkpoint(path: Path, model, optimizer, scheduler, scaler) -> TrainState:
    load_trainable_weights(path, model)
    blob = torch.load(path / "training.pt", weights_only=False)
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    if scaler is not None and blob["scaler"] is not None:
        scaler.load_state_dict(blob["scaler"])
    set_rng_state(blob["rng"])
    return TrainState(**json.loads((path / "state.json").read_text()))


# ---- sharded checkpoints (any strategy but none) ---------------------------------------------------
# One directory per step, as above, written by every rank: the strategy's own shards (DCP files for
# FSDP, DeepSpeed's checkpoint for DeepSpeed, rank 0's copy for DDP), each rank's RNG state, and rank
# 0's schedule and state.json. Rank 0 renames it into place only after every rank has finished.

def _rng_file(directory: Path, rank: int) -> Path:
    return directory / f"rng-rank{rank:05d}.pt"


def save_sharded_checkpoint(ckpt_root: Path, state: TrainState, strategy, scheduler, keep_last: int) -> Path:
    ctx = strategy.ctx
    final = ckpt_root / f"{PREFIX}{state.step:07d}"
    tmp = ckpt_root / f".tmp-{final.name}"
    if ctx.is_main:
        ckpt_root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    ctx.barrier()
    strategy.save_shards(tmp)
    torch.save(rng_state(), _rng_file(tmp, ctx.rank))
    if ctx.is_main:
        torch.save({"scheduler": scheduler.state_dict()}, tmp / "training.pt")
        (tmp / "sharding.json").write_text(json.dumps({"strategy": strategy.name, "world_size": ctx.world_size}) + "\n")
        (tmp / "state.json").write_text(json.dumps(asdict(state)) + "\n")
    ctx.barrier()
    if ctx.is_main:
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in list_checkpoints(ckpt_root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    ctx.barrier()
    return final


def load_sharded_checkpoint(path: Path, strategy, scheduler) -> TrainState:
    ctx = strategy.ctx
    meta_file = path / "sharding.json"
    if not meta_file.is_file():
        raise ValueError(f"{path} was written by a one-process run: resume it with sharding.strategy=none")
    meta = json.loads(meta_file.read_text())
    if meta["strategy"] != strategy.name:
        raise ValueError(f"{path} was written by strategy {meta['strategy']}, this run uses {strategy.name}: resume "
                         "with the same strategy")
    if meta["world_size"] != ctx.world_size and strategy.name != "fsdp":
        raise ValueError(f"{path} was written by {meta['world_size']} ranks, this run has {ctx.world_size}: only FSDP "
                         "checkpoints reshard to another world size")
    strategy.load_shards(path)
    scheduler.load_state_dict(torch.load(path / "training.pt", weights_only=False)["scheduler"])
    rng = _rng_file(path, ctx.rank)
    if rng.is_file():  # a resharded FSDP resume has no file for new ranks: they keep their fresh RNG
        set_rng_state(torch.load(rng, weights_only=False))
    return TrainState(**json.loads((path / "state.json").read_text()))
