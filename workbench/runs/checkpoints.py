"""The layout of a run's checkpoints, below both the engine (which saves and resumes them) and the
strategies (each writes its own files into a checkpoint directory)."""

from __future__ import annotations

from pathlib import Path

import torch

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
PREFIX = "step-"  # checkpoints/step-0000042
STATE_FILE = "state.json"
TRAINING_FILE = "training.pt"
TRAINABLE_FILE = "trainable.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
SHARDING_FILE = "sharding.json"


def rng_file(directory: Path, rank: int) -> Path:
    return directory / f"rng-rank{rank:05d}.pt"


def optimizer_file(directory: Path) -> Path:
    """Where a one-process/DDP checkpoint keeps the optimizer and scaler (older ones: training.pt)."""
    path = directory / OPTIMIZER_FILE
    return path if path.is_file() else directory / TRAINING_FILE


def list_checkpoints(ckpt_root: Path) -> list[Path]:
    if not ckpt_root.is_dir():
        return []
    return sorted(p for p in ckpt_root.iterdir() if p.name.startswith(PREFIX) and (p / STATE_FILE).is_file())


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().contiguous() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable_weights(path: Path, model) -> None:
    """Copy ``path/trainable.safetensors`` into the model's parameters of the same names."""
    from safetensors.torch import load_file

    weights = load_file(str(path / TRAINABLE_FILE))
    params = dict(model.named_parameters())
    missing = [n for n in weights if n not in params]
    if missing:
        raise ValueError(
            f"checkpoint {path} holds weights this model lacks ({missing[:3]}...): the model or LoRA "
            "settings differ from the run that wrote it"
        )
    with torch.no_grad():
        for n, t in weights.items():
            params[n].copy_(t)
