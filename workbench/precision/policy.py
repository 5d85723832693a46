"""The precision policy: the user's intent resolved once against the hardware.

Everything downstream (model loading, autocast, the grad scaler, the census, the UI) reads this
object instead of re-deriving dtypes from strings.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import asdict, dataclass, field

import torch

from ..config import ConfigError, PrecisionSection, RunConfig
from ..dtypes import DTYPE_BY_NAME, dtype_name
from ..hardware import Hardware


class PrecisionWarning(UserWarning):
    pass


@dataclass(frozen=True)
class PrecisionPolicy:
    requested: str  # what the config asked for (may be "auto")
    mode: str  # fp32 | fp16 | bf16 | pure-bf16
    device_type: str  # cpu | cuda
    autocast_dtype: torch.dtype | None  # None = no autocast
    base_dtype: torch.dtype  # storage of frozen (or all, in full fine-tuning) weights
    trainable_dtype: torch.dtype  # storage of trained weights (LoRA adapters: fp32 under AMP)
    use_grad_scaler: bool
    scaler: dict = field(default_factory=dict)  # GradScaler kwargs when use_grad_scaler
    notes: tuple = ()  # warnings given while resolving

    def autocast(self):
        """Context manager for forward passes (a no-op when this policy has no autocast)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    @property
    def compute_dtype(self) -> torch.dtype:
        """What the frozen base's matmuls run in: the autocast dtype, else the dtype the base is stored in (a
        quantized base's layers dequantize to it)."""
        return self.autocast_dtype or self.base_dtype

    def make_grad_scaler(self) -> torch.amp.GradScaler | None:
        if not self.use_grad_scaler:
            return None
        return torch.amp.GradScaler(self.device_type, **self.scaler)

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("autocast_dtype", "base_dtype", "trainable_dtype"):
            d[k] = None if d[k] is None else dtype_name(d[k])
        d["notes"] = list(self.notes)
        return d


_WEIGHTS_OF_MODE = {"bf16": "bfloat16", "pure-bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def inference_dtype(requested: str, device: torch.device) -> str:
    """The dtype a model's weights are held in to answer requests on ``device``: ``requested``, or for ``auto`` the
    16-bit (or 32-bit) dtype that precision.mode ``auto`` trains in there (``resolve_policy``: one decision for both):
    bfloat16 on a GPU with bf16 and on a CPU with native bf16 (AVX512-BF16/AMX), float16 on a GPU without bf16,
    float32 on a CPU without native bf16 (where bf16 is emulated, many times slower)."""
    if requested != "auto":
        return requested
    mode = resolve_policy(PrecisionSection(mode="auto"), Hardware.of(device), lora_enabled=True).mode
    return _WEIGHTS_OF_MODE[mode]


def resolve_policy(
    precision: PrecisionSection, hardware: Hardware, lora_enabled: bool, model_dtype: str = "auto"
) -> PrecisionPolicy:
    """The one place a requested precision mode becomes dtypes, for ``hardware``. Returns the policy
    with its notes (known traps); raises ConfigError naming ``precision.mode`` when it cannot run."""
    p = precision
    notes: list[str] = []
    mode = p.mode
    slow_cpu_bf16 = hardware.device_type == "cpu" and not hardware.fast_bf16
    if mode == "auto" and slow_cpu_bf16:
        mode = "fp32"
        notes.append(
            "precision.mode=auto chose fp32: this CPU has no native bf16 (AVX512-BF16/AMX), where "
            "bf16 and fp16 are emulated and many times slower than fp32"
        )
    elif mode == "auto":
        mode = "bf16" if hardware.bf16 else "fp16"
        if mode == "fp16":
            notes.append(
                "precision.mode=auto chose fp16 because this device has no bf16; GLM-family models are "
                "known to diverge in fp16 (overflowing activations): watch the overflow events"
            )
    if mode in ("bf16", "pure-bf16") and not hardware.bf16:
        raise ConfigError(
            [
                (
                    "precision.mode",
                    f"{mode} needs bfloat16 support, which this {hardware.device_type} device lacks: use fp16 or fp32",
                )
            ]
        )
    if mode in ("bf16", "pure-bf16") and slow_cpu_bf16:
        notes.append(
            f"{mode} on this CPU is emulated (no AVX512-BF16/AMX) and ~25x slower than fp32: fine for "
            "tiny models, use fp32 for real runs here"
        )
    if mode == "fp16" and hardware.device_type == "cpu":
        notes.append(
            "fp16 autocast on CPU is correct but ~40x slower than bf16 here: use it to study loss "
            "scaling on tiny models, bf16 or fp32 for real runs"
        )

    autocast_dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16, "pure-bf16": None}[mode]
    if mode == "pure-bf16":
        base = trainable = torch.bfloat16
    else:
        trainable = torch.float32  # master weights / LoRA adapters stay fp32 under AMP
        if model_dtype != "auto":
            base = DTYPE_BY_NAME[model_dtype]
        elif lora_enabled and autocast_dtype is not None:
            base = autocast_dtype  # frozen base needs no fp32 copy: store it in the compute dtype
        else:
            base = torch.float32
    scaler = {}
    if mode == "fp16":
        scaler = dict(
            init_scale=p.init_scale,
            growth_factor=p.growth_factor,
            backoff_factor=p.backoff_factor,
            growth_interval=p.growth_interval,
        )
    return PrecisionPolicy(
        requested=p.mode,
        mode=mode,
        device_type=hardware.device_type,
        autocast_dtype=autocast_dtype,
        base_dtype=base,
        trainable_dtype=trainable,
        use_grad_scaler=mode == "fp16",
        scaler=scaler,
        notes=tuple(notes),
    )


def resolve_precision(cfg: RunConfig, device: torch.device) -> PrecisionPolicy:
    """A run's policy: ``cfg.precision`` (and the base storage dtype) resolved for ``device``, warning
    about known traps."""
    policy = resolve_policy(cfg.precision, Hardware.of(device), cfg.lora.enabled, cfg.model.dtype)
    for n in policy.notes:
        warnings.warn(n, PrecisionWarning, stacklevel=2)
    return policy
