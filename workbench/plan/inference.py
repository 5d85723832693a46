"""Inference memory: weights in fp16 / bf16 / int8 / int4, the KV cache at a stated context, and what one
screenshot adds (its image tokens in the cache, the vision tower's forward), on one GPU.

Weight formats are the ones this project's exports write (``workbench export``): fp16/bf16 casts of the
merged model, and torchao weight-only quantization through transformers' ``TorchAoConfig``, which
quantizes every ``nn.Linear`` except the output embedding (lm_head) and leaves embeddings, norms,
biases and convolutions in the model's dtype. int8: one byte per weight plus a scale (model dtype) and an
int8 zero point per output row, as torchao saves them (checked to the byte on tiny GLM-4);
int4 (torchao's ``Int4WeightOnlyConfig``, group 128): half a byte per weight plus a scale and a zero
point per group of 128. The same rule predicts the sizes measured on SmolLM2's exports
(``docs/export.md``), which the fact-check compares.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch

from ..config import ConfigError
from .activations import ActivationInputs, VisionShape, estimate_vision_activations
from .arch import DecoderShape, build_meta_model, load_model_config, text_config
from .images import ImageLoad, images_for
from .planner import CUDA_CONTEXT_BYTES, FRAGMENTATION, RTX4090_BYTES, DeviceSet, GiB

WEIGHT_FORMATS = ("fp16", "bf16", "int8", "int4")
INT4_GROUP = 128
DEFAULT_CONTEXT = 4096  # text tokens (prompt + history + answer); screenshots add their image tokens
T4 = DeviceSet(count=1, bytes_per_device=15360 * 2**20, host_ram=32 * GiB, name="Tesla T4 16 GB", bf16=False)
RTX4090 = DeviceSet(count=1, bytes_per_device=RTX4090_BYTES, host_ram=64 * GiB, name="RTX 4090 24 GB")
INFERENCE_DEVICES = (T4, RTX4090)


@dataclass(frozen=True)
class LinearSplit:
    """A model's parameters as weight-only quantization sees them."""

    linear_weights: int  # elements of nn.Linear weights that get quantized (lm_head excluded)
    linear_rows: int  # their output features (one scale each for per-row int8)
    other: int  # everything kept in the model dtype: embeddings, lm_head, norms, biases, convolutions

    @property
    def total(self) -> int:
        return self.linear_weights + self.other


@functools.lru_cache(maxsize=16)
def linear_split(source: str) -> LinearSplit:
    """Count from the model built on the meta device (tied weights once, as saved)."""
    model = build_meta_model(load_model_config(source))
    head = model.get_output_embeddings()
    seen, weights, rows = set(), 0, 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module is not head and id(module.weight) not in seen:
            seen.add(id(module.weight))
            weights += module.weight.numel()
            rows += module.out_features
    total = sum(p.numel() for p in model.parameters())
    return LinearSplit(linear_weights=weights, linear_rows=rows, other=total - weights)


def weight_bytes(source: str, fmt: str, rest_dtype: torch.dtype = torch.float16) -> int:
    """Bytes of the weights of ``source`` stored as ``fmt`` (fp32, fp16, bf16, int8, int4); unquantized
    parameters and quantization scales in ``rest_dtype`` (the dtype the model was quantized from)."""
    s = linear_split(source)
    rest = rest_dtype.itemsize
    if fmt == "fp32":
        return s.total * 4
    if fmt in ("fp16", "bf16"):
        return s.total * 2
    if fmt == "int8":
        return (
            s.linear_weights + s.linear_rows * (rest + 1) + s.other * rest
        )  # + a scale and an int8 zero point per row
    if fmt == "int4":
        return s.linear_weights // 2 + -(-s.linear_weights // INT4_GROUP) * 2 * rest + s.other * rest
    raise ConfigError([("--weights", f"{fmt!r}: use one of fp32, {', '.join(WEIGHT_FORMATS)}")])


@dataclass(frozen=True)
class InferencePlan:
    """One GPU serving one request of ``seq_len`` tokens (text context + image tokens)."""

    model: str
    fmt: str
    devices: DeviceSet
    context: int  # text tokens
    seq_len: int  # text + image tokens held in the KV cache
    images: ImageLoad | None
    gpu: dict  # category -> bytes
    refused: str | None  # why this format cannot run on this GPU as asked
    notes: tuple
    vision_forward: int = 0  # the vision tower's forward working set (inside forward_working_set when larger)

    @property
    def total(self) -> int:
        return sum(self.gpu.values())

    @property
    def headroom(self) -> int:
        return self.devices.bytes_per_device - self.total

    @property
    def fits(self) -> bool:
        return self.refused is None and self.headroom >= 0

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "weights_format": self.fmt,
            "device": self.devices.name,
            "device_bytes": self.devices.bytes_per_device,
            "context": self.context,
            "seq_len": self.seq_len,
            "images": self.images.to_dict() if self.images else None,
            "gpu": {**self.gpu, "total": self.total},
            "headroom": self.headroom,
            "fits": self.fits,
            "refused": self.refused,
            "notes": list(self.notes),
            "vision_forward": self.vision_forward,
        }


def kv_cache_bytes(shape: DecoderShape, tokens: int, batch: int = 1, dtype_bytes: int = 2) -> int:
    """K and V of every layer for ``tokens`` positions (transformers' DynamicCache, 16-bit)."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * batch * dtype_bytes


def prefill_bytes(shape: DecoderShape, tokens: int, batch: int = 1) -> int:
    """Working set of the prompt's forward (no grad) in one decoder layer: the residual, the normed input,
    the fused gate/up output, its activation and the product (16-bit; SDPA keeps no seq^2 scores), plus
    fp32 logits of the last position only (generate asks for one)."""
    per_token = 2 * shape.hidden + 2 * shape.intermediate + 2 * shape.intermediate
    return tokens * batch * per_token * 2 + batch * shape.vocab * 4


def predict_inference(
    model: str,
    fmt: str,
    devices: DeviceSet,
    context: int = DEFAULT_CONTEXT,
    images_per_row: int = 1,
    image_size: str = "1080x2400",
    batch: int = 1,
) -> InferencePlan:
    """GPU bytes to serve ``model`` with ``fmt`` weights: one request of ``context`` text tokens and
    ``images_per_row`` screenshots (their image tokens sit in the KV cache too). ``fmt`` fp32 (a CPU's) is planned
    too, though no export writes it."""
    if fmt not in (*WEIGHT_FORMATS, "fp32"):
        raise ConfigError([("--weights", f"{fmt!r}: use one of {', '.join(WEIGHT_FORMATS)}")])
    if context < 1 or batch < 1:
        raise ConfigError([("--context", f"context {context} and batch {batch}: both must be >= 1")])
    config = load_model_config(model)
    shape = DecoderShape.from_config(config)
    images = images_for(model, config, image_size, images_per_row) if images_per_row else None
    seq = context + (images.tokens_per_row if images else 0)
    notes, refused = [], None
    compute = {"fp16": torch.float16, "fp32": torch.float32}.get(fmt, torch.bfloat16)
    if not devices.bf16 and fmt not in ("fp16", "fp32"):
        compute = torch.float16
        if fmt == "bf16":
            refused = (
                f"{devices.name} has no bf16 (sm_75): load the weights as fp16 (the fp16 row; GLM models are "
                "known to overflow in fp16) or fp32"
            )
        else:
            notes.append(f"{fmt} weights dequantize to fp16 here (no bf16 on {devices.name})")
    if fmt == "int4" and not devices.bf16:
        notes.append(
            "torchao's int4 kernel (tinygemm) needs sm_80+: on a T4 use bitsandbytes NF4 (about the same bytes)"
        )
    gpu = {
        "weights": weight_bytes(model, fmt, compute),
        "kv_cache": kv_cache_bytes(shape, seq, batch, dtype_bytes=compute.itemsize),
    }
    working = prefill_bytes(shape, seq, batch)
    vision_forward = 0
    if images is not None:
        v = VisionShape.from_config(config)
        a = ActivationInputs(
            micro_batch=1,
            seq_len=2,
            autocast_dtype=None,
            base_dtype=compute,
            trainable_dtype=compute,
            full_finetune=False,
        )
        vis = estimate_vision_activations(v, a, False, images.patches_per_image, batch * images_per_row)
        # the tower runs before the prefill; its image features (tokens x hidden) stay until the prefill
        features = vis.image_tokens * v.out_hidden * compute.itemsize
        gpu["image_features"] = features
        vision_forward = vis.forward_transient
        working = max(working, vision_forward)
    gpu["forward_working_set"] = working
    # weights are allocated once, tensor by tensor; the allocator's reserve grows with what comes and goes
    gpu["fragmentation"] = int(FRAGMENTATION * (sum(gpu.values()) - gpu["weights"]))
    gpu["cuda_context"] = CUDA_CONTEXT_BYTES if devices.device_type == "cuda" else 0
    return InferencePlan(
        model=model,
        fmt=fmt,
        devices=devices,
        context=context,
        seq_len=seq,
        images=images,
        gpu=gpu,
        refused=refused,
        notes=tuple(notes),
        vision_forward=vision_forward,
    )


def inference_table(
    model: str = "autoglm-phone-9b",
    devices=INFERENCE_DEVICES,
    formats=WEIGHT_FORMATS,
    context: int = DEFAULT_CONTEXT,
    images_per_row: int = 1,
    image_size: str = "1080x2400",
    batch: int = 1,
) -> list[InferencePlan]:
    return [
        predict_inference(model, f, d, context, images_per_row, image_size, batch) for d in devices for f in formats
    ]


def max_context(
    model: str, fmt: str, devices: DeviceSet, images_per_row: int = 1, image_size: str = "1080x2400"
) -> int:
    """The longest text context that still fits (0 if none), by bisection on ``predict_inference``."""
    lo, hi = 0, text_config(load_model_config(model)).max_position_embeddings
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if predict_inference(model, fmt, devices, mid, images_per_row, image_size).fits:
            lo = mid
        else:
            hi = mid - 1
    return lo


def format_inference(rows: list[InferencePlan]) -> str:
    if not rows:
        return "no rows"
    r0 = rows[0]
    img = (
        f" + {r0.images.images_per_row} screenshot(s) of {r0.images.width}x{r0.images.height} "
        f"({r0.images.tokens_per_image:,} image tokens each + markers; vision tower forward "
        f"{r0.vision_forward / GiB:.2f} GiB)"
        if r0.images
        else ""
    )
    out = [
        f"inference memory of {r0.model}, one request: {r0.context:,} text tokens{img} = {r0.seq_len:,} tokens "
        "in the KV cache",
        f"{'GPU':<16}{'weights':<9}{'fits':>8}{'GiB':>7}{'headroom':>9}  weights/kv/image/working/ctx+frag GiB",
    ]
    for r in rows:
        g = r.gpu
        parts = "/".join(
            f"{g.get(k, 0) / GiB:.2f}" for k in ("weights", "kv_cache", "image_features", "forward_working_set")
        )
        fits = "refused" if r.refused else ("yes" if r.fits else "no")
        out.append(
            f"{r.devices.name:<16}{r.fmt:<9}{fits:>8}{r.total / GiB:>7.2f}{r.headroom / GiB:>9.2f}  "
            f"{parts}/{(g['cuda_context'] + g['fragmentation']) / GiB:.2f}"
        )
    seen = set()
    for r in rows:
        for n in ((r.refused,) if r.refused else ()) + r.notes:
            if (r.devices.name, n) not in seen:
                seen.add((r.devices.name, n))
                out.append(f"- {r.devices.name} {r.fmt}: {n}")
    out.append(
        "weights: torchao weight-only through transformers (every Linear but lm_head; embeddings, norms and "
        "convolutions stay 16-bit); KV cache 16-bit; 0.75 GiB CUDA context and a 10% allocator reserve over the non-weight bytes assumed"
    )
    return "\n".join(out)


# ---- will a model about to be loaded for inference fit? ---------------------------------------------------------------
_FORMAT_OF_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def live_devices(device: torch.device) -> DeviceSet:
    """The one device a model is about to be loaded on, as the planner describes devices: a GPU's total memory, or the
    host RAM free now (a CPU's model lives there)."""
    import psutil

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device.index or 0)
        return DeviceSet(
            count=1,
            bytes_per_device=props.total_memory,
            host_ram=psutil.virtual_memory().total,
            name=f"{device} ({props.name})",
            bf16=torch.cuda.is_bf16_supported(),
        )
    free = psutil.virtual_memory().available
    return DeviceSet(count=1, bytes_per_device=free, host_ram=free, name="this machine", device_type="cpu")


def serving_plan(
    source: str, dtype: str, devices: DeviceSet, quantization=None, context: int = DEFAULT_CONTEXT
) -> InferencePlan:
    """The memory of ``source`` answering one request of ``context`` text tokens (and one 1080x2400 screenshot for a
    vision-language model) with its weights in ``dtype``, or, given a ``quantization`` section whose base is
    quantized, its linear layers at their quantized bytes (the planner's census of that base)."""
    config = load_model_config(source)
    plan = predict_inference(
        source, _FORMAT_OF_DTYPE[dtype], devices, context, images_per_row=1 if hasattr(config, "vision_config") else 0
    )
    if quantization is None or quantization.base == "none":
        return plan
    from ..config import LoraSection
    from .arch import planned_census
    from .planner import policy_for

    lora = LoraSection(enabled=False)
    weights = planned_census(source, lora, policy_for("fp32", lora, devices, dtype), quantization=quantization).bytes()
    return dataclasses.replace(plan, gpu={**plan.gpu, "weights": weights})


def fit_problem(
    source: str, dtype: str, device: torch.device, quantization=None, context: int = DEFAULT_CONTEXT
) -> str | None:
    """Why ``source`` in ``dtype`` (``quantization``: a run's section, for a base quantized as it trained) will not
    fit ``device`` for one request, with the planner's figure and the fixes; None when it fits, or when the planner
    does not know the model (a hub id it has no config of: loading will tell)."""
    devices = live_devices(device)
    try:
        plan = serving_plan(source, dtype, devices, quantization, context)
    except ConfigError:
        return None
    if plan.total <= devices.bytes_per_device:
        return None
    parts = ", ".join(f"{k.replace('_', ' ')} {v / GiB:.1f}" for k, v in plan.gpu.items() if v)
    need = (
        f"{source} in {dtype}{' over its ' + quantization.base + ' base' if quantization is not None and quantization.base != 'none' else ''} "
        f"needs {plan.total / GiB:.1f} GiB for one request of {context:,} text tokens"
        f"{' and one 1080x2400 screenshot' if plan.images else ''} ({parts} GiB; `workbench plan --inference`), "
        f"and {devices.name} has {devices.bytes_per_device / GiB:.1f} GiB"
        f"{' of RAM free' if device.type == 'cpu' else ''}"
    )
    if device.type == "cuda":
        fixes = (
            "serve a run trained over a 4-bit base (quantization.base nf4, e.g. the recipe "
            "autoglm-phone-9b-qlora-1x24gb: its base is loaded in nf4), serve with vLLM (--engine vllm; over two "
            "GPUs add --vllm-arg=--tensor-parallel-size=2), or use a GPU with more memory"
        )
    else:
        fixes = (
            "a GPU (--device cuda), --dtype bfloat16 (half the bytes of float32; slow on a CPU without native "
            "bf16), or a machine with more free RAM"
        )
    return f"{need}: {fixes}"
