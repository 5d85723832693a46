"""The memory planner: per-device GPU and host bytes for a model, precision, strategy, offload and
LoRA/full choice on a device set, from the model config alone (meta device, no weights).

Framework rules modelled (``docs/memory_planner.md`` has the derivations and every assumption):

* ``none`` (one process) and ``ddp``: dtypes from the project's ``PrecisionPolicy``; torch AdamW.
  DDP adds its gradient buckets (``gradient_as_bucket_view=False`` by default: a second copy of the
  gradients).
* ``fsdp`` (FSDP2 ``fully_shard``): parameters, gradients and AdamW state sharded 1/N in their
  storage dtypes (fp32 under AMP: the shards are the master weights); per-layer unsharded buffers in
  the compute dtype (stage 3 = reshard after forward: current + prefetched layer; stage 2 = keep
  every layer unsharded between forward and backward) and fp32 gradient reduce-scatter buffers.
  Offload (``CPUOffloadPolicy``) moves parameters, gradients and optimizer state together.
* ``deepspeed`` stages 1-3: module in fp16/bf16, fp32 master weights + fp32 Adam moments + an fp32
  gradient partition in the optimizer (the ZeRO paper's 2+2+12 bytes per parameter plus 4),
  partitioned per stage; buckets from DeepSpeed 0.19.8's defaults. ``offload=optimizer`` moves the
  fp32 state to host RAM; ``optimizer+params`` (stage 3) moves the low-precision shards too.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import asdict, dataclass, field

import torch

from ..config import (
    LOSS_HEADS,
    QUANTIZED_BASES,
    ConfigError,
    LoraSection,
    PrecisionSection,
    QuantizationSection,
    RunConfig,
    single_process,
    world_size_for,
)
from ..config.schema import QUANTIZED_BASE_UNSHARDABLE
from ..hardware import Hardware
from ..models.quantize import QUANTIZE_FROM
from ..precision import PrecisionPolicy, resolve_policy
from .activations import (
    ActivationInputs,
    VisionShape,
    estimate_activations,
    estimate_vision_activations,
    lora_layers_in,
    lora_targets_in_layer,
    quantized_linears_in_layer,
)
from .arch import PlannedCensus, load_model_config, planned_census
from .images import images_for
from .model_state import ADAMW_STEP_BYTES, ModelState, predict_single_process_state

GiB = 1024**3
FP32 = torch.float32
PRECISIONS = ("fp32", "fp16", "bf16", "pure-bf16")
STRATEGIES = ("none", "ddp", "fsdp", "deepspeed")
OFFLOADS = ("none", "optimizer", "optimizer+params")

# Assumptions (stated in the docs; change them here)
CUDA_CONTEXT_BYTES = int(0.75 * GiB)  # torch CUDA context + cuBLAS/cuDNN workspaces on an Ada GPU: 0.5-1 GiB
NCCL_BYTES = int(0.25 * GiB)  # NCCL communicator buffers per GPU when more than one process
FRAGMENTATION = 0.10  # caching-allocator reserve over the allocated peak
HOST_PER_PROCESS_BYTES = 3 * GiB  # Python + torch + CUDA host libraries + tokenizer/data per rank
# DeepSpeed 0.19.8 ZeRO defaults (deepspeed/runtime/zero/config.py), in elements
DS_REDUCE_BUCKET = int(5e8)
DS_ALLGATHER_BUCKET = int(5e8)
DS_PREFETCH_BUCKET = int(5e7)
DS_MAX_LIVE_PARAMETERS = int(1e9)
DS_PERSISTENCE_THRESHOLD = int(1e5)  # stage 3 keeps parameters smaller than this unpartitioned


@dataclass(frozen=True)
class DeviceSet:
    count: int
    bytes_per_device: int
    host_ram: int
    name: str = "GPU"
    bf16: bool = True
    device_type: str = "cuda"  # cpu: the run's own host (a CPU run's plan)

    @property
    def hardware(self) -> Hardware:
        """These devices as the precision policy resolves against them (GPUs with bf16 run it natively)."""
        if self.device_type == "cpu":
            return Hardware.of(torch.device("cpu"))
        return Hardware.gpu(self.bf16)

    @classmethod
    def parse(cls, devices: str, host_ram: str = "64GiB", name: str = "GPU") -> DeviceSet:
        m = re.fullmatch(r"\s*(?:(\d+)\s*[xX*]\s*)?(.+)", devices or "")
        if not m:
            raise ConfigError([("--devices", f"{devices!r}: write COUNTxSIZE, e.g. 2x24GiB or 1x16GB")])
        count = int(m.group(1) or 1)
        if count < 1:
            raise ConfigError([("--devices", f"{devices!r}: need at least one device")])
        return cls(
            count=count,
            bytes_per_device=parse_bytes(m.group(2), "--devices"),
            host_ram=parse_bytes(host_ram, "--host-ram"),
            name=name,
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "gib_per_device": self.bytes_per_device / GiB, "host_ram_gib": self.host_ram / GiB}


def parse_bytes(text: str, field_name: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(GiB|GB|G|MiB|MB|M|TiB|TB|T)?\s*", str(text), re.I)
    if not m:
        raise ConfigError([(field_name, f"{text!r} is not a size: write e.g. 24GiB, 24GB or 16000MiB")])
    unit = (m.group(2) or "GiB").lower()
    scale = {
        "gib": GiB,
        "g": GiB,
        "gb": 10**9,
        "mib": 2**20,
        "m": 2**20,
        "mb": 10**6,
        "tib": 2**40,
        "t": 2**40,
        "tb": 10**12,
    }[unit]
    return int(float(m.group(1)) * scale)


# An RTX 4090 reports 24564 MiB total to the driver.
RTX4090_BYTES = 24564 * 2**20
DEFAULT_DEVICES = DeviceSet(count=2, bytes_per_device=RTX4090_BYTES, host_ram=64 * GiB, name="RTX 4090 24 GB")
T4_DEVICES = DeviceSet(count=1, bytes_per_device=15360 * 2**20, host_ram=32 * GiB, name="Tesla T4 16 GB", bf16=False)


@dataclass(frozen=True)
class Setting:
    """One point of the matrix: what a run would do. ``stage``: FSDP 2|3, DeepSpeed 1|2|3."""

    precision: str = "bf16"
    strategy: str = "none"
    stage: int = 0
    offload: str = "none"
    lora: bool = True
    world_size: int = 1
    micro_batch: int = 1
    seq_len: int = 2048  # text tokens per example; images add their tokens on top
    gradient_checkpointing: bool = True
    images_per_row: int = 0  # screenshots per example (vision-language models)
    image_size: str = "1080x2400"  # WIDTHxHEIGHT of each, before the image processor's resize
    loss_head: str = "chunked"  # memory.loss_head (forward.head): full | labels | chunked
    label_tokens: int | None = None  # text positions with a label per example; None: all of them
    loss_chunk_tokens: int = 512  # memory.loss_chunk_tokens
    quantized_base: str = "none"  # quantization.base: none | nf4 | int8 (LoRA over a quantized frozen base)

    @property
    def label(self) -> str:
        strat = {"none": "single", "ddp": "DDP"}.get(self.strategy) or (
            f"FSDP-zero{self.stage}" if self.strategy == "fsdp" else f"DS-ZeRO{self.stage}"
        )
        off = "" if self.offload == "none" else f"+off:{self.offload}"
        img = f"/{self.images_per_row}img@{self.image_size}" if self.images_per_row else ""
        head = "" if self.loss_head == "chunked" else f"/{self.loss_head}-head"
        adapter = "LoRA" if self.lora else "full"
        if self.quantized_base != "none":
            adapter = f"QLoRA-{self.quantized_base}" if self.lora else f"full-{self.quantized_base}"
        return f"{self.precision}/{strat}{off}/{adapter}{'/ckpt' if self.gradient_checkpointing else ''}{img}{head}"

    def invalid_reason(self) -> str | None:
        """Why a real framework cannot run this combination, or None."""
        if self.precision not in PRECISIONS:
            return f"precision {self.precision!r} unknown: use one of {', '.join(PRECISIONS)}"
        if self.strategy not in STRATEGIES:
            return f"strategy {self.strategy!r} unknown: use one of {', '.join(STRATEGIES)}"
        if self.offload not in OFFLOADS:
            return f"offload {self.offload!r} unknown: use one of {', '.join(OFFLOADS)}"
        if self.strategy in ("none", "ddp") and self.offload != "none":
            return "plain torch and DDP have no optimizer/parameter offload (use DeepSpeed or FSDP)"
        if self.strategy == "fsdp" and self.stage not in (2, 3):
            return "FSDP stage is 2 (reshard_after_forward=False) or 3 (full shard)"
        if self.strategy == "fsdp" and self.offload == "optimizer":
            return (
                "FSDP2's CPUOffloadPolicy offloads parameters, gradients and optimizer together: use optimizer+params"
            )
        if self.strategy == "deepspeed" and self.stage not in (1, 2, 3):
            return "DeepSpeed ZeRO stage is 1, 2 or 3"
        if self.strategy == "deepspeed" and self.offload == "optimizer+params" and self.stage != 3:
            return "DeepSpeed offloads parameters only under ZeRO-3"
        if self.strategy == "deepspeed" and self.precision == "pure-bf16":
            return "DeepSpeed's bf16 mode always keeps fp32 master weights: that is the bf16 row"
        if single_process(self.strategy) and self.world_size != 1:
            return "strategy none runs one process: world_size must be 1"
        if self.loss_head not in LOSS_HEADS:
            return f"loss head {self.loss_head!r} unknown: use one of {', '.join(LOSS_HEADS)}"
        if self.quantized_base not in QUANTIZED_BASES:
            return f"quantized base {self.quantized_base!r} unknown: use one of {', '.join(QUANTIZED_BASES)}"
        if self.quantized_base != "none" and not self.lora:
            return f"a {self.quantized_base} base is frozen: full fine-tuning has nothing to train in it (use LoRA)"
        if (self.strategy, self.quantized_base) in QUANTIZED_BASE_UNSHARDABLE:
            return f"FSDP2 cannot shard an int8 base: it {QUANTIZED_BASE_UNSHARDABLE[(self.strategy, self.quantized_base)]}"
        return None


@dataclass(frozen=True)
class Plan:
    """A prediction for one setting on one device set. Bytes per GPU (every rank alike) and per host."""

    model: str
    setting: Setting
    devices: DeviceSet
    state: ModelState  # per rank, comparable one to one with measure_model_state
    gpu: dict  # category -> bytes per GPU (sums to gpu_total)
    host: dict  # category -> bytes of host RAM for all ranks together
    lora_extras: dict  # what LoRA adds (already inside the categories above)
    activations: dict  # the activation estimate's parts
    census: dict
    notes: tuple = ()
    invalid: str | None = None

    @property
    def gpu_total(self) -> int:
        return sum(self.gpu.values())

    @property
    def host_total(self) -> int:
        return sum(self.host.values())

    @property
    def gpu_headroom(self) -> int:
        return self.devices.bytes_per_device - self.gpu_total

    @property
    def host_headroom(self) -> int:
        return self.devices.host_ram - self.host_total

    @property
    def fits(self) -> bool:
        return self.invalid is None and self.gpu_headroom >= 0 and self.host_headroom >= 0

    def comparable(self) -> dict:
        """Categories a run can measure (model state exactly; activations saved for backward)."""
        return {
            **{k: v for k, v in self.state.to_dict().items() if k != "total"},
            "activations": self.activations["saved_forward"],
        }

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "setting": asdict(self.setting),
            "label": self.setting.label,
            "devices": self.devices.to_dict(),
            "invalid": self.invalid,
            "fits": self.fits,
            "model_state": self.state.to_dict(),
            "gpu": {**self.gpu, "total": self.gpu_total},
            "host": {**self.host, "total": self.host_total},
            "gpu_headroom": self.gpu_headroom,
            "host_headroom": self.host_headroom,
            "lora_extras": self.lora_extras,
            "activations": self.activations,
            "census": self.census,
            "notes": list(self.notes),
        }


def policy_for(
    precision: str, lora: LoraSection, devices: DeviceSet | None = None, model_dtype: str = "auto"
) -> PrecisionPolicy:
    """The project's PrecisionPolicy for a precision mode on ``devices`` (default: the 2x RTX 4090)."""
    return resolve_policy(
        PrecisionSection(mode=precision), (devices or DEFAULT_DEVICES).hardware, lora.enabled, model_dtype
    )


def predict(
    model: str,
    setting: Setting,
    devices: DeviceSet = DEFAULT_DEVICES,
    lora: LoraSection | None = None,
    policy: PrecisionPolicy | None = None,
    device_type: str = "cuda",
    attn_implementation: str = "sdpa",
    precision: PrecisionSection | None = None,
    quantization: QuantizationSection | None = None,
) -> Plan:
    """Predict memory for ``model`` (a preset, or a directory with config.json) under ``setting``.
    ``precision``: a run's precision section, whose per-module rules the census applies. ``quantization``: a run's
    quantization section (its skip_modules and double_quant; default: the schema's) for ``setting.quantized_base``."""
    lora = (lora or LoraSection()).model_copy(update={"enabled": setting.lora})
    invalid = setting.invalid_reason()
    if invalid is None and setting.world_size > devices.count:
        invalid = f"world_size {setting.world_size} exceeds the {devices.count} device(s) given"
    prec = setting.precision if setting.precision in PRECISIONS else "bf16"
    if policy is None:
        policy = policy_for(prec, lora, devices)
    quant_base = setting.quantized_base if setting.quantized_base in QUANTIZED_BASES else "none"
    quantization = (quantization or QuantizationSection()).model_copy(update={"base": quant_base})
    c = planned_census(model, lora, policy, precision, quantization)
    n = max(1, setting.world_size)
    notes: list[str] = []

    lowp = {"fp16": torch.float16, "bf16": torch.bfloat16, "pure-bf16": torch.bfloat16}.get(prec)
    act_in = _compute_dtypes(setting.strategy, prec, lowp, policy)
    images = None
    if setting.images_per_row:
        config = load_model_config(model)
        images = images_for(model, config, setting.image_size, setting.images_per_row)
        c = _vision_reached(c)
    seq_len = setting.seq_len + (images.tokens_per_row if images else 0)  # the language model's sequence
    adapted = lora_layers_in(c)  # the decoder layers with adapters (none under full fine-tuning)
    act_inputs = ActivationInputs(
        micro_batch=setting.micro_batch,
        seq_len=seq_len,
        full_finetune=not setting.lora,
        lora_targets=lora_targets_in_layer(c) if setting.lora else frozenset(),
        lora_rank=lora.r,
        lora_layers=adapted if setting.lora and lora.layers is not None else None,
        lora_dropout=lora.dropout if setting.lora else 0.0,
        gradient_checkpointing=setting.gradient_checkpointing,
        attn_implementation=attn_implementation,
        device_type=device_type,
        loss_head=setting.loss_head,
        # image tokens never carry labels: at most the text positions do
        label_tokens=setting.seq_len - 1
        if setting.label_tokens is None
        else min(setting.label_tokens, setting.seq_len - 1),
        loss_chunk_tokens=setting.loss_chunk_tokens,
        quantized_base=quant_base,
        quantized_linears=quantized_linears_in_layer(c),
        dequantized_bytes=_dequantized_bytes(c, policy),
        **act_in,
    )
    acts = estimate_activations(c.shape, act_inputs)
    activations = acts.to_dict()
    vision_bytes = 0
    if images is not None:
        vision_bytes = _add_vision(activations, notes, c, config, images, acts, act_inputs, setting)
    state, buffers, host_state = _model_state(c, setting, policy, lowp, n, notes)
    gpu, host = _placement(c, setting, state, buffers, host_state, acts, act_in, vision_bytes, n)
    return Plan(
        model=model,
        setting=setting,
        devices=devices,
        state=state,
        gpu=gpu,
        host=host,
        lora_extras=_lora_extras(c, acts, setting, len(adapted)),
        activations=activations,
        census=c.summary(),
        notes=tuple(notes),
        invalid=invalid,
    )


def _dequantized_bytes(c: PlannedCensus, policy: PrecisionPolicy) -> int:
    """A quantized base's working copy: the largest quantized weight dequantized for one matmul (forward, and again
    in backward for the input's gradient). nf4 dequantizes to the 16-bit dtype it was quantized from, then casts to
    the compute dtype when that differs; LLM.int8 dequantizes to its input's dtype (the base's)."""
    q = c.quantized
    if not q:
        return 0
    largest = max(p.numel for p in q)
    if q[0].quantized == "int8":
        return largest * policy.base_dtype.itemsize
    compute = policy.compute_dtype
    return largest * (QUANTIZE_FROM.itemsize + (compute.itemsize if compute != QUANTIZE_FROM else 0))


def _compute_dtypes(strategy: str, prec: str, lowp, policy: PrecisionPolicy) -> dict:
    """The compute dtypes the framework actually runs with (ActivationInputs' autocast/base/trainable dtypes)."""
    if strategy == "deepspeed":
        # DeepSpeed casts the whole module (adapters too) to fp16/bf16 and runs without autocast
        return dict(autocast_dtype=None, base_dtype=lowp or FP32, trainable_dtype=lowp or FP32)
    if strategy == "fsdp" and lowp is not None and prec != "pure-bf16":
        # FSDP2 MixedPrecisionPolicy casts parameters to bf16/fp16 per layer instead of autocast
        return dict(autocast_dtype=None, base_dtype=lowp, trainable_dtype=lowp)
    return dict(
        autocast_dtype=policy.autocast_dtype, base_dtype=policy.base_dtype, trainable_dtype=policy.trainable_dtype
    )


def _add_vision(
    activations: dict, notes: list[str], c: PlannedCensus, config, images, acts, act_inputs, setting: Setting
) -> int:
    """The vision tower's activations folded into ``activations`` (and a note); returns what it adds to the peak."""
    seq_len = act_inputs.seq_len
    vision = [p for p in c.params if p.group == "vision"]
    vision_trainable = any(p.trainable for p in vision)
    vis = estimate_vision_activations(
        VisionShape.from_config(config),
        act_inputs,
        vision_trainable,
        images.patches_per_image,
        setting.micro_batch * setting.images_per_row,
        setting.gradient_checkpointing,
        weight_dtype=vision[0].dtype,
    )
    # inserting the image features keeps the (bool) image-token mask when the decoder's input needs a
    # gradient: full fine-tuning, or checkpointing (which makes the embeddings' output require grad)
    mask = setting.micro_batch * seq_len if (vision_trainable or setting.gradient_checkpointing) else 0
    # the tower runs first: its working set is gone before the decoder saves anything; in backward one
    # recomputed layer or block (checkpointing) is live at a time
    decoder_peak = acts.peak - acts.recompute + max(acts.recompute, vis.recompute)
    peak = vis.saved_forward + mask + max(vis.forward_transient, decoder_peak)
    vision_bytes = peak - acts.peak
    activations.update(
        saved_forward=acts.saved_forward + vis.saved_forward + mask,
        peak=peak,
        text_seq_len=setting.seq_len,
        seq_len=seq_len,
        images=images.to_dict(),
        vision=vis.to_dict(),
        vision_trainable=vision_trainable,
    )
    notes.append(
        f"{setting.images_per_row} image(s) of {images.width}x{images.height} per example: resized to "
        f"{images.resized_width}x{images.resized_height}, {images.patches_per_image:,} patches and "
        f"{images.tokens_per_image:,} image tokens each; decoder sequence {setting.seq_len:,} text -> "
        f"{seq_len:,} tokens with the images and their markers"
    )
    return vision_bytes


def _placement(
    c: PlannedCensus,
    setting: Setting,
    state,
    buffers: int,
    host_state: dict,
    acts,
    act_in: dict,
    vision_bytes: int,
    n: int,
) -> tuple[dict, dict]:
    """(bytes per GPU, bytes on the host) by category."""
    gpu = {
        "weights": state.weights - host_state.get("weights", 0),
        "gradients": state.gradients - host_state.get("gradients", 0),
        "optimizer_state": state.optimizer_state - host_state.get("optimizer_state", 0),
        "master_weights": state.master_weights - host_state.get("master_weights", 0),
        "activations": acts.peak,  # the text decoder over text + image tokens
        "vision_activations": vision_bytes,  # what the vision tower adds to the peak
        "autocast_copies": acts.autocast_copies if act_in["autocast_dtype"] is not None else 0,
        "sharding_buffers": buffers,
    }
    if setting.strategy in ("none", "ddp", "fsdp") and setting.offload == "none":
        # torch AdamW's 'step' scalars live on the CPU
        steps = ADAMW_STEP_BYTES * sum(1 for p in c.params if p.trainable and p.reached)
        gpu["optimizer_state"] -= steps
        host_state["optimizer_state"] = host_state.get("optimizer_state", 0) + steps
    gpu["fragmentation"] = int(FRAGMENTATION * sum(gpu.values()))
    gpu["cuda_context"] = CUDA_CONTEXT_BYTES
    gpu["nccl"] = NCCL_BYTES if n > 1 else 0
    host = {f"offloaded_{k}": v * n for k, v in host_state.items() if v}
    host["process_overhead"] = HOST_PER_PROCESS_BYTES * n
    return gpu, host


def _lora_extras(c: PlannedCensus, acts, setting: Setting, adapted_layers: int) -> dict:
    """The adapter's own figures (parameters, weights, gradients and AdamW, activations over its
    ``adapted_layers``)."""
    lora_params = [p for p in c.params if p.group == "lora"]
    lora_bytes = sum(p.nbytes for p in lora_params)
    return {
        "adapter_params": sum(p.numel for p in lora_params),
        "adapter_weights": lora_bytes,
        "adapter_grads_and_adamw": 3 * lora_bytes + ADAMW_STEP_BYTES * len(lora_params),
        "lora_activations": acts.lora_per_layer * (0 if setting.gradient_checkpointing else adapted_layers),
    }


def _vision_reached(c: PlannedCensus) -> PlannedCensus:
    """With images in the batch the vision tower takes part: its trainable weights get gradients."""
    params = tuple(dataclasses.replace(p, reached=True) if p.group == "vision" else p for p in c.params)
    return dataclasses.replace(c, params=params)


def _model_state(c: PlannedCensus, s: Setting, policy: PrecisionPolicy, lowp, n: int, notes: list):
    """(per-rank ModelState, GPU sharding/communication buffer bytes, per-rank part offloaded to host)."""
    total = c.count()
    trainable = [p for p in c.params if p.trainable]
    n_train = sum(p.numel for p in trainable)
    host: dict = {}
    if s.strategy in ("none", "ddp"):
        state = predict_single_process_state(c)
        buffers = 0
        if s.strategy == "ddp":
            # DDP's flat reduction buckets hold a copy of every trainable gradient (gradient_as_bucket_view=False)
            buffers = sum(p.nbytes for p in trainable)
            notes.append("DDP buckets double the gradient memory unless gradient_as_bucket_view=True")
        return state, buffers, host

    if s.strategy == "fsdp":
        grads = sum(p.nbytes for p in trainable if p.reached)
        opt = sum(2 * p.nbytes for p in trainable if p.reached)
        steps = ADAMW_STEP_BYTES * sum(1 for p in trainable if p.reached)
        # a quantized base's packed codes are sharded like any parameter, its quantization constants stay whole
        constants = sum(p.stored(0)[2] for p in c.quantized)
        state = ModelState(
            weights=-(-(c.bytes() - constants) // n) + constants,
            gradients=-(-grads // n),
            optimizer_state=-(-opt // n) + steps,
            master_weights=0,
        )
        compute = (lowp if lowp is not None else policy.base_dtype).itemsize
        root = c.units.get("root", 0)  # embeddings, lm_head, ...: the root stays unsharded all step
        if s.stage == 3:
            unsharded = (root + 2 * c.largest_layer) * compute  # root + the layer computing + the one prefetched
        else:
            unsharded = total * compute  # every layer stays unsharded from its forward until its backward
        reduce = 2 * c.largest_layer * 4 if n_train else 0  # unsharded fp32 grads of a layer, double-buffered
        if s.offload == "optimizer+params":
            host = {"weights": state.weights, "gradients": state.gradients, "optimizer_state": state.optimizer_state}
        return state, unsharded + reduce, host

    # DeepSpeed
    lp = lowp.itemsize if lowp is not None else 4
    mixed = lowp is not None
    # DeepSpeed casts float parameters to fp16/bf16; a quantized base's packed codes keep their bytes and are
    # partitioned (stage 3) like any parameter, their quantization constants stay whole on every rank
    stored = [p.stored(lp) for p in c.params]
    constants = sum(k for _, _, k in stored)
    persist_bytes = sum(b for e, b, _ in stored if e < DS_PERSISTENCE_THRESHOLD) if s.stage == 3 else 0
    all_bytes = sum(b for _, b, _ in stored)
    weights = all_bytes + constants if s.stage < 3 else -(-(all_bytes - persist_bytes) // n) + persist_bytes + constants
    grads_lp = n_train * lp if s.stage == 1 else -(-n_train * lp // n)
    grads_fp32 = -(-n_train * 4 // n) if mixed else 0  # fp32 gradient partition the optimizer steps on
    master = -(-n_train * 4 // n) if mixed else 0
    opt = -(-n_train * 8 // n)
    state = ModelState(weights=weights, gradients=grads_lp + grads_fp32, optimizer_state=opt, master_weights=master)
    bucket = min(DS_REDUCE_BUCKET, max(n_train, 1)) * lp
    if s.stage < 3:
        buffers = bucket + min(DS_ALLGATHER_BUCKET, total) * lp  # overlap_comm defaults to off below stage 3
    else:
        live = min(DS_MAX_LIVE_PARAMETERS, max(c.largest_unit, c.largest_layer) + DS_PREFETCH_BUCKET)
        buffers = 2 * bucket + live * lp  # overlap_comm defaults on for stage 3: double-buffered reduction
    if n_train == 0:
        buffers = 0
    if s.offload in ("optimizer", "optimizer+params"):
        # ZeRO-Offload streams reduced gradients from the buckets into an fp32 partition in host RAM
        grads_fp32 = -(-n_train * 4 // n)
        state = ModelState(weights=weights, gradients=grads_fp32, optimizer_state=opt, master_weights=master)
        host = {"optimizer_state": opt, "master_weights": master, "gradients": grads_fp32}
        if s.offload == "optimizer+params":
            host["weights"] = weights - persist_bytes - constants
    if not mixed:
        notes.append("DeepSpeed in fp32: no master copy, Adam on the fp32 parameters")
    return state, buffers, host


def predict_for_run(
    cfg: RunConfig,
    policy: PrecisionPolicy,
    world_size: int = 1,
    strategy: str | None = None,
    stage: int | None = None,
    offload: str | None = None,
    devices: DeviceSet | None = None,
    micro_batch: int | None = None,
    seq_len: int | None = None,
    images_per_row: int = 0,
    image_size: str = "1080x2400",
    label_tokens: int | None = None,
) -> Plan:
    """The plan of a run: its own model, precision policy (resolved by the caller: the engine for its
    device, the plan panel for the target devices), LoRA section, module rules, batch shape and, unless a
    what-if overrides them, its ``sharding`` strategy, stage and offload.

    ``devices`` defaults to the run's own device: a GPU of torch's reported size, or the host RAM on CPU.
    ``images_per_row`` screenshots of ``image_size`` per example add the vision tower and their image
    tokens (on top of the text tokens) to the activations. ``label_tokens``: text positions per example that
    carry a label (None: all), what the loss head (``cfg.memory``) scales with.
    """
    sh = cfg.sharding
    if devices is None:
        devices = _local_devices(policy.device_type, world_size)
    setting = Setting(
        precision=policy.mode,
        strategy=strategy or sh.strategy,
        stage=sh.stage if stage is None else stage,
        offload=offload or sh.offload,
        lora=cfg.lora.enabled,
        world_size=world_size,
        micro_batch=micro_batch or cfg.schedule.micro_batch_size,
        seq_len=seq_len or cfg.data.max_length,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        images_per_row=images_per_row,
        image_size=image_size,
        loss_head=cfg.memory.loss_head,
        label_tokens=label_tokens,
        loss_chunk_tokens=cfg.memory.loss_chunk_tokens,
        quantized_base=cfg.quantization.base,
    )
    return predict(
        cfg.model.source,
        setting,
        devices,
        lora=cfg.lora,
        policy=policy,
        device_type=policy.device_type,
        attn_implementation=cfg.model.attn_implementation,
        precision=cfg.precision,
        quantization=cfg.quantization,
    )


def _local_devices(device_type: str, world_size: int) -> DeviceSet:
    import psutil

    host = psutil.virtual_memory().total
    if device_type == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return DeviceSet(
            count=max(world_size, torch.cuda.device_count()),
            bytes_per_device=props.total_memory,
            host_ram=host,
            name=props.name,
            bf16=torch.cuda.is_bf16_supported(),
        )
    return DeviceSet(count=max(world_size, 1), bytes_per_device=host, host_ram=host, name="CPU", device_type="cpu")


# ---------------------------------------------------------------------------------------------
# The matrix


def all_settings(
    devices: DeviceSet,
    micro_batch: int,
    seq_len: int,
    lora_choices=(True, False),
    ckpt_choices=(False, True),
    precisions=PRECISIONS,
    images_per_row: int = 0,
    image_size: str = "1080x2400",
    quantized_base: str = "none",
) -> list[Setting]:
    out = []
    strategies = [("none", 0)] + (
        [("ddp", 0), ("fsdp", 2), ("fsdp", 3), ("deepspeed", 1), ("deepspeed", 2), ("deepspeed", 3)]
        if devices.count > 1
        else [("deepspeed", 1), ("deepspeed", 2), ("deepspeed", 3)]
    )
    for prec in precisions:
        for strat, stage in strategies:
            for off in OFFLOADS:
                for lora in lora_choices:
                    for ck in ckpt_choices:
                        s = Setting(
                            precision=prec,
                            strategy=strat,
                            stage=stage,
                            offload=off,
                            lora=lora,
                            world_size=world_size_for(strat, devices.count),
                            micro_batch=micro_batch,
                            seq_len=seq_len,
                            gradient_checkpointing=ck,
                            images_per_row=images_per_row,
                            image_size=image_size,
                            quantized_base=quantized_base,
                        )
                        if s.invalid_reason() is None:
                            out.append(s)
    return out


_OFFLOAD_COST = {"none": 0, "optimizer": 1, "optimizer+params": 2}
_STRATEGY_COST = {
    ("none", 0): 0,
    ("ddp", 0): 1,
    ("fsdp", 2): 2,
    ("deepspeed", 1): 2,
    ("deepspeed", 2): 3,
    ("fsdp", 3): 4,
    ("deepspeed", 3): 5,
}
_PRECISION_COST = {"bf16": 0, "pure-bf16": 1, "fp16": 2, "fp32": 3}


def cost_key(p: Plan) -> tuple:
    """ "Cheapest" = slowest features avoided first: no offload (PCIe + CPU Adam) before offload; no
    gradient checkpointing (~1/3 more compute) before it; then the strategy with the least
    communication (single < DDP < FSDP-zero2 = ZeRO-1 < ZeRO-2 < FSDP-zero3 < ZeRO-3); then precision
    (bf16 AMP < pure-bf16 < fp16 (overflow risk on GLM) < fp32 (no tensor-core speed)); then most headroom."""
    s = p.setting
    if not s.lora and p.devices.bf16 is False and s.precision in ("bf16", "pure-bf16"):
        return (99,)
    return (
        _OFFLOAD_COST[s.offload],
        int(s.gradient_checkpointing),
        _STRATEGY_COST[(s.strategy, s.stage)],
        _PRECISION_COST[s.precision],
        -min(p.gpu_headroom, p.host_headroom),
    )


@dataclass
class Matrix:
    model: str
    devices: DeviceSet
    plans: list = field(default_factory=list)

    def cheapest(self, lora: bool | None = None) -> Plan | None:
        ok = [
            p
            for p in self.plans
            if p.fits
            and (lora is None or p.setting.lora == lora)
            and (self.devices.bf16 or p.setting.precision not in ("bf16", "pure-bf16"))
        ]
        return min(ok, key=cost_key) if ok else None

    def to_dict(self) -> dict:
        best = {
            k: (p.to_dict() if p else None)
            for k, p in (("overall", self.cheapest()), ("lora", self.cheapest(True)), ("full", self.cheapest(False)))
        }
        return {
            "model": self.model,
            "devices": self.devices.to_dict(),
            "cheapest_rule": cost_key.__doc__.strip(),
            "cheapest": best,
            "rows": [_row(p) for p in self.plans],
        }


def _row(p: Plan) -> dict:
    return {
        "label": p.setting.label,
        **asdict(p.setting),
        "fits": p.fits,
        "gpu_total": p.gpu_total,
        "gpu_headroom": p.gpu_headroom,
        "host_total": p.host_total,
        "host_headroom": p.host_headroom,
        "gpu": p.gpu,
        "host": p.host,
        "model_state": p.state.to_dict(),
    }


def plan_matrix(
    model: str,
    devices: DeviceSet = DEFAULT_DEVICES,
    micro_batch: int = 1,
    seq_len: int = 2048,
    lora: LoraSection | None = None,
    lora_choices=(True, False),
    ckpt_choices=(False, True),
    precisions=PRECISIONS,
    images_per_row: int = 0,
    image_size: str = "1080x2400",
    quantized_base: str = "none",
) -> Matrix:
    """Every setting for ``model`` on ``devices`` (``quantized_base``: its frozen base quantized in all of them)."""
    m = Matrix(model, devices)
    for s in all_settings(
        devices,
        micro_batch,
        seq_len,
        lora_choices,
        ckpt_choices,
        precisions,
        images_per_row,
        image_size,
        quantized_base,
    ):
        m.plans.append(predict(model, s, devices, lora=lora))
    return m
