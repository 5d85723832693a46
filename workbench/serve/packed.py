"""Linear layers with their weights pre-packed for oneDNN: the CPU decode step's batched matmuls.

Profiling the server at 8 streams on SmolLM2 fp32 (one thread) put ~75% of a decode step in ``F.linear``, and a
batch-8 step cost ~2x a batch-1 step although both read the same weights once: for a handful of rows the default
fp32 GEMM repacks the weight on every call. oneDNN's linear on a weight packed once up front (what inductor's
freezing and IPEX do) makes a batch-8 step cost about what a batch-1 step costs, so throughput scales with the
batch. The packed copy is extra memory (one more copy of every linear weight) and is only right while the weights
do not change: the server packs only a model it loaded itself and never trains.
"""

from __future__ import annotations

import functools
import logging

import torch

log = logging.getLogger(__name__)

PACK_FOR_ROWS = 8  # oneDNN's hint for the row count the packing is tuned for (the decode batch)


def packing_available(model: torch.nn.Module) -> bool:
    """fp32 weights on the CPU, and a torch built with oneDNN and its linear ops."""
    try:
        param = next(model.parameters())
    except StopIteration:
        return False
    return (
        param.device.type == "cpu"
        and param.dtype == torch.float32
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def _packed_forward(packed: torch.Tensor, bias, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def pack_linear_weights(model: torch.nn.Module) -> int:
    """Make every ``nn.Linear`` of ``model`` compute with a oneDNN-packed copy of its weight (in place, for good);
    returns how many were packed (0 where packing is unavailable). Adapters loaded afterwards wrap these same
    modules (peft calls the base layer), so they keep the packed base."""
    if not packing_available(model):
        return 0
    count = 0
    for module in model.modules():
        # plain fp32 weights only: a quantized export's weights are tensor subclasses (torchao's Int8Tensor
        # reports float32 too) that oneDNN cannot repack
        if (
            type(module) is torch.nn.Linear
            and module.weight.dtype == torch.float32
            and type(module.weight.data) is torch.Tensor
        ):
            packed = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), PACK_FOR_ROWS)
            bias = module.bias.detach() if module.bias is not None else None
            module.forward = functools.partial(_packed_forward, packed, bias)
            count += 1
    log.info("packed %d linear weights for oneDNN", count)
    return count
