"""Device and process memory for the ``memory`` event. Model-state bytes (params, grads, optimizer
state, master weights) are measured by ``workbench.plan.measure_model_state``, under the same names
as the planner's prediction, so the two compare one to one."""

from __future__ import annotations

import psutil
import torch


def device_memory() -> list[dict]:
    if not torch.cuda.is_available():
        return []
    return [
        {
            "device": f"cuda:{i}",
            "allocated": torch.cuda.memory_allocated(i),
            "reserved": torch.cuda.memory_reserved(i),
            "peak": torch.cuda.max_memory_allocated(i),
        }
        for i in range(torch.cuda.device_count())
    ]


def host_rss() -> int:
    return psutil.Process().memory_info().rss
