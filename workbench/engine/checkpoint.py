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


def save_checkpoint(ckpt_root: Path, state: TrainState, model, optimizer, scheduler, scaler, keep_last: int) -> Path:
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = ckpt_root / f"{PREFIX}{state.step:07d}"
    tmp = ckpt_root / f".tmp-{final.name}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_file(trainable_state(model), str(tmp / "trainable.safetensors"))
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler is not None else None, "rng": rng_state()}, tmp / "training.pt")
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


def load_checkpoint(path: Path, model, optimizer, scheduler, scaler) -> TrainState:
    weights = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = [n for n in weights if n not in params]
    if missing:
        raise ValueError(f"checkpoint {path} holds weights this model lacks ({missing[:3]}...): the model or LoRA "
                         "settings differ from the run that wrote it")
    with torch.no_grad():
        for n, t in weights.items():
            params[n].copy_(t)
    blob = torch.load(path / "training.pt", weights_only=False)
    optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    if scaler is not None and blob["scaler"] is not None:
        scaler.load_state_dict(blob["scaler"])
    set_rng_state(blob["rng"])
    return TrainState(**json.loads((path / "state.json").read_text()))
