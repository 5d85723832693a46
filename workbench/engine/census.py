"""Parameter census: counts and bytes by module group x dtype x trainable x quantized (the live FP16/FP32 counts)."""
from __future__ import annotations

from collections import defaultdict

import torch

from ..models.groups import module_group
from ..dtypes import dtype_name
from ..precision.qat import quantized_label


def parameter_census(model: torch.nn.Module) -> tuple[list[dict], dict]:
    """Rows {group, dtype, trainable, quantized, count, bytes} and totals {dtype: count}. ``quantized`` is ''
    for ordinary weights, 'fake-quant' under quantization-aware training, the quantized tensor type once
    converted. Shared (tied) parameters are counted once, as ``named_parameters`` yields them once."""
    acc: dict = defaultdict(lambda: [0, 0])
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for local, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            name = f"{module_name}.{local}" if module_name else local
            quantized = quantized_label(module, p)
            key = (module_group(name), dtype_name(p.dtype), bool(p.requires_grad), quantized)
            acc[key][0] += p.numel()
            acc[key][1] += _stored_bytes(p) if quantized not in ("", "fake-quant") else p.numel() * p.element_size()
    rows = [{"group": g, "dtype": d, "trainable": t, "quantized": q, "count": c, "bytes": b}
            for (g, d, t, q), (c, b) in sorted(acc.items())]
    totals: dict = defaultdict(int)
    for r in rows:
        totals[r["dtype"]] += r["count"]
    return rows, dict(totals)


def _stored_bytes(p: torch.Tensor) -> int:
    """Bytes a quantized tensor subclass holds: its inner tensors' (int8 data, scales, zero points)."""
    if hasattr(p, "__tensor_flatten__"):
        names, _ = p.__tensor_flatten__()
        return sum(_stored_bytes(getattr(p, n)) for n in names)
    return p.numel() * p.element_size()
