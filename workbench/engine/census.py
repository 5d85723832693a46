"""Parameter census: counts and bytes by module group x dtype x trainable x quantized (the live FP16/FP32 counts).

A quantized base's weights (``quantization.base``) are their own dtypes, nf4 and int8, beside float32/bfloat16/float16:
counted by the elements they compute with and their bytes with the quantization constants
(``models.quantize.stored_bytes``), so the rows are what the planner predicts (``plan``) to the byte."""

from __future__ import annotations

from collections import defaultdict

import torch

from ..dtypes import dtype_name
from ..models.groups import module_group
from ..models.quantize import quantized_kind, stored_bytes, weight_elements
from ..precision.qat import quantized_label


def parameter_census(model: torch.nn.Module) -> tuple[list[dict], dict]:
    """Rows {group, dtype, trainable, quantized, count, bytes} and totals {dtype: count}. ``quantized`` is ''
    for ordinary weights, 'fake-quant' under quantization-aware training, the quantized tensor type once
    converted, 'bitsandbytes' for a quantized base's weights (whose dtype is nf4 or int8). Shared (tied) parameters
    are counted once, as ``named_parameters`` yields them once."""
    acc: dict = defaultdict(lambda: [0, 0])
    seen: set[int] = set()
    storages: set = set()  # quantization constants a bitsandbytes version shares between layers count once
    for module_name, module in model.named_modules():
        base_kind = quantized_kind(module)
        for local, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            name = f"{module_name}.{local}" if module_name else local
            if base_kind and p is module.weight:
                key = (module_group(name), base_kind, bool(p.requires_grad), "bitsandbytes")
                acc[key][0] += weight_elements(module)
                acc[key][1] += stored_bytes(module, storages, local=False)  # the whole model, as the other rows
                continue
            quantized = quantized_label(module, p)
            key = (module_group(name), dtype_name(p.dtype), bool(p.requires_grad), quantized)
            acc[key][0] += p.numel()
            acc[key][1] += _stored_bytes(p) if quantized not in ("", "fake-quant") else p.numel() * p.element_size()
    rows = [
        {"group": g, "dtype": d, "trainable": t, "quantized": q, "count": c, "bytes": b}
        for (g, d, t, q), (c, b) in sorted(acc.items())
    ]
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
