"""Memory snapshot: GPU allocator figures per device; on CPU, process RSS; and model-state bytes."""
from __future__ import annotations

import psutil
import torch


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def params_bytes(model: torch.nn.Module) -> int:
    return sum(tensor_bytes(p) for p in model.parameters())


def grads_bytes(model: torch.nn.Module) -> int:
    return sum(tensor_bytes(p.grad) for p in model.parameters() if p.grad is not None)


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> int:
    return sum(tensor_bytes(v) for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


def device_memory() -> list[dict]:
    if not torch.cuda.is_available():
        return []
    return [
        {"device": f"cuda:{i}", "allocated": torch.cuda.memory_allocated(i), "reserved": torch.cuda.memory_reserved(i),
         "peak": torch.cuda.max_memory_allocated(i)}
        for i in range(torch.cuda.device_count())
    ]


def host_rss() -> int:
    return psutil.Process().memory_info().rss
