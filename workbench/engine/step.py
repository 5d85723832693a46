"""One optimizer step of a run."""
from __future__ import annotations

import torch

from ..config.optimizer import optimizer_settings


def build_optimizer(params: list, schedule) -> torch.optim.Optimizer:
    """The optimizer of a run's trainable ``params``: torch AdamW on ``config.optimizer.optimizer_settings``
    (what the DeepSpeed config of the run writes too), with foreach kernels."""
    return torch.optim.AdamW(params, **optimizer_settings(schedule), foreach=True)
