"""The optimizer a run trains with, as settings: AdamW, its learning rate and weight decay from ``schedule``, its
betas and eps torch's defaults. One definition: the engine builds its optimizer from it
(``engine.step.build_optimizer``), the DeepSpeed config of a run writes it (``distributed.ds_config``) and the
DeepSpeed importer compares a file's optimizer with it (``config.deepspeed``)."""

from __future__ import annotations

OPTIMIZER = "AdamW"  # torch.optim.AdamW; DeepSpeed's optimizer.type
ADAMW_BETAS = (0.9, 0.999)
ADAMW_EPS = 1e-8


def optimizer_settings(schedule, learning_rate: float | None = None) -> dict:
    """AdamW's constructor arguments for ``schedule`` (a ``ScheduleSection``): ``lr`` (``learning_rate`` when given:
    the one a run derives for a null ``schedule.learning_rate``), ``weight_decay``, ``betas``, ``eps``."""
    lr = schedule.learning_rate if learning_rate is None else learning_rate
    return {"lr": lr, "weight_decay": schedule.weight_decay, "betas": ADAMW_BETAS, "eps": ADAMW_EPS}
