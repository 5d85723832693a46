"""Quantization-aware training (``quantization.qat``) through torchao: prepare -> train -> convert.

``prepare`` swaps the decoder's linear layers for torchao FakeQuantizedLinear, whose forward rounds the
weight (and, for int8-dynamic, the input activations) to the target grid while keeping fp32/bf16 weights
and straight-through gradients. Under LoRA the fake-quantized layers are the frozen base layers (peft's
``base_layer``): the adapter learns around the quantization error of the weights it will be deployed with.
``convert`` replaces the fake quantizers with real int8/int4 weights; the converted model computes what
the fake-quantized one did (measured at run end, reported in the ``qat_converted`` event).

Only the decoder's linears are quantized (module group ``decoder``): the LoRA matrices stay in float, the
embeddings and lm_head stay float (SmolLM2 ties lm_head to the embedding table, which a linear-layer
quantizer must not change), and GLM-4V's vision tower is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from ..models.groups import module_group
from .parity import logit_agreement

os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")  # CPU: no custom kernels needed

QAT_SCHEMES = ("int8-weight", "int8-dynamic", "int4-weight")
INT4_GROUP_SIZE = 32


def base_config(scheme: str):
    """The torchao post-training config QAT prepares for and converts to (the ones whose convert reproduces
    the fake-quantized forward with torchao 0.18)."""
    from torchao.quantization import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
        PerAxis,
        PerGroup,
    )

    if scheme == "int8-weight":
        return IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
    if scheme == "int8-dynamic":
        return Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int8, weight_granularity=PerAxis(0))
    if scheme == "int4-weight":
        return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(INT4_GROUP_SIZE))
    raise ValueError(f"unknown QAT scheme {scheme!r}: one of {', '.join(QAT_SCHEMES)}")


def _quantizable(module: torch.nn.Module, name: str) -> bool:
    return isinstance(module, torch.nn.Linear) and module_group(name) == "decoder"


def qat_targets(model: torch.nn.Module) -> list[tuple[str, torch.nn.Linear]]:
    return [(n, m) for n, m in model.named_modules() if _quantizable(m, n)]


def qat_problems(model: torch.nn.Module, scheme: str) -> list[str]:
    """Why ``scheme`` cannot quantize this model's decoder linears (empty when it can)."""
    targets = qat_targets(model)
    if not targets:
        return ["the model has no decoder linear layers to quantize"]
    if scheme == "int4-weight":
        odd = [n for n, m in targets if m.in_features % INT4_GROUP_SIZE]
        if odd:
            return [
                f"int4-weight quantizes in groups of {INT4_GROUP_SIZE} input features; {len(odd)} layer(s) have "
                f"in_features not divisible by it (e.g. {odd[0]}): use int8-weight or int8-dynamic"
            ]
    return []


def prepare_qat(model: torch.nn.Module, scheme: str) -> int:
    """Fake-quantize the decoder's linear layers in place; returns how many were prepared."""
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig

    count = len(qat_targets(model))
    quantize_(model, QATConfig(base_config(scheme), step="prepare"), filter_fn=_quantizable)
    return count


def convert_qat(model: torch.nn.Module, scheme: str) -> int:
    """Replace the fake quantizers with real quantized weights in place; returns how many layers were converted."""
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig

    count = sum(1 for _, m in model.named_modules() if is_fake_quantized(m))
    quantize_(model, QATConfig(base_config(scheme), step="convert"), filter_fn=lambda m, n: is_fake_quantized(m))
    return count


@torch.no_grad()
def convert_and_compare(
    model: torch.nn.Module, scheme: str, logits: Callable[[], torch.Tensor], attention_mask: torch.Tensor
) -> dict:
    """Convert in place (``convert_qat``) and compare the converted model with the fake-quantized one: ``logits()``
    is the model's logits of one batch (``forward.batch_logits``), taken before and after; the ``qat_converted``
    event's figures, over the unpadded positions of ``attention_mask``."""
    model.eval()
    with torch.no_grad():
        fake_quantized = logits().float()
    layers = convert_qat(model, scheme)
    with torch.no_grad():
        figures = logit_agreement(fake_quantized, logits().float(), attention_mask)
    return {
        "layers": layers,
        "max_logit_diff": figures.max_logit_diff,
        "greedy_agreement": figures.greedy_agreement,
        "positions": figures.positions,
    }


def is_fake_quantized(module: torch.nn.Module) -> bool:
    return hasattr(module, "weight_fake_quantizer")  # torchao's FakeQuantizedLinear (duck-typed: no torchao import)


def quantized_label(module: torch.nn.Module, param: torch.Tensor) -> str:
    """The census's ``quantized`` column: fake-quant while training, the quantized tensor type once converted,
    '' for ordinary weights."""
    if is_fake_quantized(module):
        return "fake-quant"
    if type(param).__module__.startswith("torchao"):  # a converted weight (not e.g. FSDP's DTensor)
        return type(param).__name__
    return ""
