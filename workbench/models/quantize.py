"""A quantized frozen base (``quantization.base``: nf4 or int8, QLoRA): the base's linear layers replaced by
bitsandbytes' ``Linear4bit`` / ``Linear8bitLt`` before LoRA wraps them, and everything that must know what they hold.

bitsandbytes, not torchao's NF4 tensor, because one library then serves both kinds the setting offers (torchao has
no LLM.int8 layer that trains under LoRA), peft wraps, merges and dequantizes its layers itself (``peft.tuners.lora
.bnb``), transformers and vLLM load the same format, and 0.50 runs on these CPUs (checked: nf4 and int8 train,
fp16 autocast with a GradScaler included). Its CPU build is slower than a GPU's kernels, not different in what it
stores: the bytes below hold on both.

Quantizing is done here, in place, on a base built the usual way (``models.load_base_model``), so a code-built tiny
model, the packaged SmolLM2 and a hub model go through one path, the one ``models.build_run_model`` takes for
training, serving, chat and eval alike. It is what transformers' ``BitsAndBytesConfig`` loading does per layer (the
same ``Params4bit`` / ``Int8Params`` moved to the device, which quantizes them), without a second loader.

Bytes, per quantized weight of ``out x in`` elements (``quantized_weight_bytes``; the planner counts with it and the
census and memory events measure the tensors, which a test holds equal):

* nf4: ``ceil(n / 2)`` packed 4-bit codes + one scale per block of 64: with double quantization an 8-bit scale per
  block, an fp32 scale per 256 blocks and an fp32 offset (QLoRA's double quantization), else an fp32 scale per block;
  plus the 16-entry NF4 code table (fp32) and, double-quantized, the 256-entry table of the scales (fp32), which
  bitsandbytes 0.50 keeps per layer.
* int8: ``n`` bytes + an fp32 scale per output row (LLM.int8's row-wise absmax).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ..dtypes import dtype_name

NF4_BLOCK = 64  # bitsandbytes' default 4-bit block size (transformers' BitsAndBytesConfig keeps it)
NESTED_BLOCK = 256  # double quantization: scales quantized in blocks of 256
NF4_CODE_ENTRIES = 16
NESTED_CODE_ENTRIES = 256
INT8_THRESHOLD = 6.0  # LLM.int8's outlier threshold (transformers' llm_int8_threshold default)
KINDS = ("nf4", "int8")
# The dtype a base is loaded in to be quantized: its 16-bit checkpoint weights (what QLoRA loads), so the quantized
# layers are the same whatever dtype a run stores the rest in and computes with (trained in bf16, served in fp32).
QUANTIZE_FROM = torch.bfloat16
FLAG = {"nf4": "is_loaded_in_4bit", "int8": "is_loaded_in_8bit"}  # what peft reads to wrap bitsandbytes layers


def quantized_weight_bytes(kind: str, rows: int, cols: int, double_quant: bool = True) -> int:
    """Bytes a ``rows x cols`` linear weight holds once quantized as ``kind`` (see the module's docstring)."""
    n = rows * cols
    if kind == "int8":
        return n + 4 * rows
    if kind != "nf4":
        raise ValueError(f"unknown quantized base {kind!r}: one of {', '.join(KINDS)}")
    blocks = math.ceil(n / NF4_BLOCK)
    scales = blocks + 4 * math.ceil(blocks / NESTED_BLOCK) + 4 + 4 * NESTED_CODE_ENTRIES if double_quant else 4 * blocks
    return math.ceil(n / 2) + scales + 4 * NF4_CODE_ENTRIES


def quantized_data_bytes(kind: str, rows: int, cols: int) -> int:
    """The packed weight's own bytes (what a strategy shards); the rest of ``quantized_weight_bytes`` is constants."""
    n = rows * cols
    return n if kind == "int8" else math.ceil(n / 2)


def skipped(name: str, skip_modules: Iterable[str]) -> bool:
    """Whether module ``name`` stays unquantized: one of ``skip_modules`` is a dotted part of it."""
    dotted = f".{name}."
    return any(f".{entry}." in dotted for entry in skip_modules)


def quantization_targets(model: torch.nn.Module, skip_modules: Iterable[str]) -> list[tuple[str, torch.nn.Linear]]:
    """The plain linear layers ``quantize_base`` replaces (works on the meta device: the planner counts with it)."""
    skip = tuple(skip_modules)
    return [(n, m) for n, m in model.named_modules() if type(m) is torch.nn.Linear and not skipped(n, skip)]


@dataclass(frozen=True)
class QuantizedBase:
    """What ``quantize_base`` did: the ``base_quantized`` event's figures."""

    kind: str
    layers: int  # linear layers replaced
    weights: int  # elements they hold
    bytes_before: int  # their weights' bytes in the storage dtype they came in
    bytes_after: int  # packed weights + quantization constants
    compute_dtype: str
    double_quant: bool
    skipped: tuple  # linear layers left as they were (by skip_modules)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "layers": self.layers,
            "weights": self.weights,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "compute_dtype": self.compute_dtype,
            "double_quant": self.double_quant,
            "skipped": list(self.skipped),
        }


def quantize_base(
    model: torch.nn.Module,
    kind: str,
    compute_dtype: torch.dtype,
    double_quant: bool = True,
    skip_modules: Iterable[str] = ("lm_head", "visual"),
    device: torch.device | str = "cpu",
) -> QuantizedBase:
    """Replace ``model``'s linear layers (but ``skip_modules``) in place by bitsandbytes' quantized ones holding the
    same weights, quantized on ``device`` (where they then live; a GPU quantizes in milliseconds per layer, and the
    base never needs its 16-bit copy there). Frozen, computing in ``compute_dtype``. Marks the model as peft expects
    (``is_loaded_in_4bit`` / ``is_loaded_in_8bit``), so LoRA wraps the layers with peft's bitsandbytes layers."""
    import bitsandbytes as bnb

    if kind not in KINDS:
        raise ValueError(f"unknown quantized base {kind!r}: one of {', '.join(KINDS)}")
    skip = tuple(skip_modules)
    targets = quantization_targets(model, skip)
    before = after = weights = 0
    for name, linear in targets:
        w = linear.weight.data
        before += w.numel() * w.element_size()
        weights += w.numel()
        if kind == "nf4":
            layer = bnb.nn.Linear4bit(
                linear.in_features,
                linear.out_features,
                bias=linear.bias is not None,
                compute_dtype=compute_dtype,
                compress_statistics=double_quant,
                quant_type="nf4",
                device="meta",
            )
            # One weight layout everywhere: bitsandbytes would repack a CPU layer's weight for its inference kernel
            # on the first eval-mode forward (bf16-only compute), so a served model would differ from the trained one.
            layer.support_avx512bf16_for_cpu = False
            layer.weight = bnb.nn.Params4bit(
                w, requires_grad=False, compress_statistics=double_quant, quant_type="nf4", module=layer
            ).to(device)
        else:
            layer = bnb.nn.Linear8bitLt(
                linear.in_features,
                linear.out_features,
                bias=linear.bias is not None,
                has_fp16_weights=False,
                threshold=INT8_THRESHOLD,
                device="meta",
            )
            layer.weight = bnb.nn.Int8Params(w, requires_grad=False, has_fp16_weights=False).to(device)
        if linear.bias is not None:
            layer.bias = torch.nn.Parameter(linear.bias.data.to(device), requires_grad=False)
        layer.requires_grad_(False)
        after += stored_bytes(layer)
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, layer)
    setattr(model, FLAG[kind], True)
    left = tuple(n for n, m in model.named_modules() if type(m) is torch.nn.Linear)
    return QuantizedBase(
        kind, len(targets), weights, before, after, dtype_name(compute_dtype), double_quant and kind == "nf4", left
    )


def _bnb_layer(module: torch.nn.Module) -> str:
    """'4bit' / '8bit' for bitsandbytes' own layers (not peft's wrappers of the same names), else ''."""
    for cls in type(module).__mro__:
        if cls.__module__.startswith("bitsandbytes"):
            return {"Linear4bit": "4bit", "Linear8bitLt": "8bit"}.get(cls.__name__, "")
    return ""


def _quant_state(module: torch.nn.Module):
    """A 4-bit layer's QuantState: on its weight, or on the layer where a strategy replaced the weight (FSDP2)."""
    return getattr(module.weight, "quant_state", None) or getattr(module, "quant_state", None)


def quantized_kind(module: torch.nn.Module) -> str:
    """'nf4' (or bitsandbytes' other 4-bit type), 'int8', or '' for a module that is no bitsandbytes layer. Read from
    the layer, so it holds when a strategy has wrapped its weight (FSDP2's DTensor, DeepSpeed's partitioned
    parameter); no bitsandbytes import for models without one."""
    layer = _bnb_layer(module)
    if layer == "4bit":
        state = _quant_state(module)
        return getattr(state, "quant_type", None) or getattr(module.weight, "quant_type", "nf4")
    return "int8" if layer == "8bit" else ""


def weight_elements(module: torch.nn.Module) -> int:
    """Elements of a quantized layer's weight as the layer computes with it (out x in; a packed 4-bit weight's own
    ``numel`` is half of that)."""
    return module.in_features * module.out_features


def _constants(module: torch.nn.Module) -> list[torch.Tensor]:
    """The tensors a quantized layer keeps beside its packed weight (whole on every rank: no strategy shards them)."""
    if _bnb_layer(module) == "4bit":
        state = _quant_state(module)
        if state is None:
            return []
        out = [state.absmax, state.code]
        if getattr(state, "nested", False):
            out += [state.offset, state.state2.absmax, state.state2.code]
        return out
    # LLM.int8: the row scales sit on the weight until the first forward moves them onto the layer's state
    scb = getattr(module.weight, "SCB", None)
    if scb is None:
        scb = getattr(getattr(module, "state", None), "SCB", None)
    return [scb] if scb is not None else []


def _weight_bytes(weight: torch.Tensor, local: bool) -> int:
    """The packed weight's bytes: this process's part (``local``: FSDP2's shard, DeepSpeed ZeRO-3's partition) or the
    whole."""
    if hasattr(weight, "to_local"):
        t = weight.to_local() if local else weight
        return t.numel() * t.element_size()
    ds = getattr(weight, "ds_tensor", None)
    if ds is not None:
        if local and not getattr(weight, "ds_persist", False):
            return ds.numel() * ds.element_size()
        return weight.ds_numel * ds.element_size()
    return weight.numel() * weight.element_size()


def stored_bytes(module: torch.nn.Module, seen: set | None = None, local: bool = True) -> int:
    """Bytes a quantized layer holds: its packed weight (``local``: this process's shard of it; else the whole) and its
    quantization constants, each constant's storage once (``seen``: the storages counted already, for constants a
    bitsandbytes version shares between layers)."""
    seen = set() if seen is None else seen
    total = _weight_bytes(module.weight, local)
    for t in _constants(module):
        key = (t.data_ptr(), t.device)
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def is_quantized(model: torch.nn.Module) -> bool:
    return any(quantized_kind(m) for m in model.modules())


def cast_unquantized(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Store every floating-point parameter but the quantized weights in ``dtype`` (``Module.to(dtype)`` would leave
    those too, but rebuilds the quantized parameters it passes through; buffers keep the dtype loading gave them)."""
    quantized = {id(m.weight) for m in model.modules() if quantized_kind(m)}
    for t in model.parameters():
        if id(t) not in quantized and t.is_floating_point() and t.dtype != dtype:
            t.data = t.data.to(dtype)


@torch.no_grad()
def dequantize_base(model: torch.nn.Module, dtype: torch.dtype) -> int:
    """Replace every bitsandbytes layer of ``model`` (a base, or the base under a peft model) in place by a plain
    linear layer holding its dequantized weight in ``dtype``: the full-precision base an adapter trained over the
    quantized one is merged into. Returns how many were replaced."""
    from peft.utils.integrations import dequantize_bnb_weight

    count = 0
    for name, module in list(model.named_modules()):
        if not quantized_kind(module):
            continue
        weight = dequantize_bnb_weight(module.weight, state=getattr(module, "state", None))
        plain = torch.nn.Linear(
            module.in_features, module.out_features, bias=module.bias is not None, device=weight.device, dtype=dtype
        )
        plain.weight.data.copy_(weight.to(dtype))
        if module.bias is not None:
            plain.bias.data.copy_(module.bias.data.to(dtype))
        plain.requires_grad_(False)
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, plain)
        count += 1
    for flag in FLAG.values():
        if getattr(model, flag, False):
            setattr(model, flag, False)
    return count
