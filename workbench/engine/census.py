"""Parameter census: counts and bytes by module group x dtype x trainable (the live FP16/FP32 counts)."""
from __future__ import annotations

from collections import defaultdict

import torch

from ..models.groups import module_group
from ..precision import dtype_name

def parameter_census(model: torch.nn.Module) -> tuple[list[dict], dict]:
    """Rows {group, dtype, trainable, count, bytes} and totals {dtype: count}. Shared (tied)
    parameters are counted once, as ``named_parameters`` yields them once."""
    acc: dict = defaultdict(lambda: [0, 0])
    for name, p in model.named_parameters():
        key = (module_group(name), dtype_name(p.dtype), bool(p.requires_grad))
        acc[key][0] += p.numel()
        acc[key][1] += p.numel() * p.element_size()
    rows = [{"group": g, "dtype": d, "trainable": t, "count": c, "bytes": b} for (g, d, t), (c, b) in sorted(acc.items())]
    totals: dict = defaultdict(int)
    for r in rows:
        totals[r["dtype"]] += r["count"]
    return rows, dict(totals)
