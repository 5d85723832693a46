"""RunConfig -> DeepSpeed JSON.

``to_deepspeed_config(cfg)`` is the DeepSpeed config a RunConfig means (the engine runs on it, users
can take it to their own DeepSpeed scripts). Reading a DeepSpeed JSON into RunConfig settings is
``config.deepspeed_import``'s.
"""

from __future__ import annotations

import math
from typing import Any

from ..config.optimizer import OPTIMIZER, optimizer_settings


def to_deepspeed_config(cfg, precision, world_size: int | None = None) -> dict:
    """The DeepSpeed config this RunConfig means under ``precision`` (its policy resolved for the devices:
    ``auto`` is never guessed here), for its own world size unless ``world_size`` is given; a null learning rate
    is the one a run derives (``plan.arch.resolved_learning_rate``)."""
    from ..plan.arch import resolved_learning_rate

    s, p, sh = cfg.schedule, cfg.precision, cfg.sharding
    world = world_size or sh.world_size
    mode = precision.mode
    out: dict[str, Any] = {
        "train_batch_size": s.micro_batch_size * s.grad_accum_steps * world,
        "train_micro_batch_size_per_gpu": s.micro_batch_size,
        "gradient_accumulation_steps": s.grad_accum_steps,
        "gradient_clipping": p.max_grad_norm or 0.0,
        "optimizer": {"type": OPTIMIZER, "params": _json_settings(s, resolved_learning_rate(cfg, precision))},
        "scheduler": {
            "type": "WarmupCosineLR",
            "params": {
                "total_num_steps": s.max_steps,
                "warmup_num_steps": s.resolved_warmup_steps,
                "warmup_type": "linear",
                "warmup_min_ratio": 0.0,
                "cos_min_ratio": s.min_lr_ratio,
            },
        },
        "zero_optimization": {"stage": sh.deepspeed_stage if sh.strategy == "deepspeed" else 0},
        "steps_per_print": max(s.max_steps, 1),
    }
    if mode == "fp16":
        power = math.log2(p.init_scale)
        out["fp16"] = {
            "enabled": True,
            "loss_scale": 0,
            "initial_scale_power": int(round(power)),
            "loss_scale_window": p.growth_interval,
            "hysteresis": 1,
            "min_loss_scale": 1,
        }
    elif mode in ("bf16", "pure-bf16"):
        out["bf16"] = {"enabled": True}
    # fp32: neither section, DeepSpeed trains in fp32
    zero = out["zero_optimization"]
    if sh.offload in ("optimizer", "optimizer+params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if sh.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return out


def _json_settings(schedule, learning_rate: float) -> dict:
    """The run's optimizer settings (``config.optimizer``) as JSON values: DeepSpeed's optimizer.params."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in optimizer_settings(schedule, learning_rate).items()}


def export_notes(cfg) -> list[str]:
    """What the exported DeepSpeed config cannot say exactly."""
    p = cfg.precision
    notes = []
    if p.mode == "fp16":
        if math.log2(p.init_scale) != round(math.log2(p.init_scale)):
            notes.append(
                f"precision.init_scale={p.init_scale} is not a power of 2; DeepSpeed starts at 2^initial_scale_power"
            )
        if p.growth_factor != 2.0 or p.backoff_factor != 0.5:
            notes.append(
                "DeepSpeed's dynamic loss scaler always doubles and halves; growth_factor/backoff_factor differ"
            )
    return notes


def engine_deepspeed_config(cfg, precision, world_size: int) -> dict:
    """``to_deepspeed_config`` plus what the workbench engine needs: its own optimizer (torch AdamW, no
    compiled ops) and schedule, and the loop's accumulation boundary rather than DeepSpeed's counter."""
    ds = to_deepspeed_config(cfg, precision, world_size)
    ds.pop("optimizer")
    ds.pop("scheduler")
    ds["zero_allow_untested_optimizer"] = True
    # ZeRO-3's memory-efficient linear replaces torch.nn.functional.linear for the whole process, for good
    # ("persists unless manually reset"): a notebook kernel's later runs, the planner's measurements and any
    # other model would all run through DeepSpeed's function. Off: the engine stays a guest in the process.
    ds["zero_optimization"]["memory_efficient_linear"] = False
    ds["managed_gradient_accumulation"] = False  # step() is the boundary, as in the other strategies
    ds["steps_per_print"] = 10**9
    ds["wall_clock_breakdown"] = False
    return ds
