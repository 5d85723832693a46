"""Per-module precision rules: keep chosen modules (a vision tower, lm_head, norms) in fp32 storage and
fp32 compute while the rest of the model follows the precision mode.

Rules are applied by the engine to the built model after LoRA wrapping and before the strategy
wraps it and the optimizer exists (``workbench.engine.build``). So a rule may re-cast any parameter,
trained ones included (the optimizer is created afterwards, over the re-cast parameters), and it
works the same under FSDP and DeepSpeed ZeRO-3, whose shards are made from the re-cast module.

* Storage: the rule's dtype (``auto``: fp32 when the rule asks for fp32 compute, else unchanged).
* Compute: a float32 module runs its forward with autocast disabled and its floating inputs cast to
  fp32. The strategy must then not cast its weights back down: FSDP gives such modules a shard unit
  of their own without a low-precision ``param_dtype``; DeepSpeed casts the whole module to
  fp16/bf16, so rules are refused there (``apply_module_rules(..., strategy="deepspeed")``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from ..config import ConfigError, PrecisionSection
from ..dtypes import DTYPE_BY_NAME

_WRAPPER_PREFIXES = ("module.", "base_model.model.")  # in the order they nest
_ADAPTER_PARTS = (
    ".base_layer",
    ".lora_A",
    ".lora_B",
    ".lora_dropout",
    ".lora_embedding_A",
    ".lora_embedding_B",
    ".lora_magnitude_vector",
)


@dataclass(frozen=True)
class Rule:
    pattern: str
    storage: str  # auto | float32 | bfloat16 | float16
    compute: str  # autocast | float32
    source: str  # the config path, or "family default (...)"
    why: str = ""

    @functools.cached_property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern)

    def target_storage(self) -> torch.dtype | None:
        if self.storage != "auto":
            return DTYPE_BY_NAME[self.storage]
        return torch.float32 if self.compute == "float32" else None


def short_name(name: str) -> str:
    """A module name without wrapper prefixes (DDP/DeepSpeed ``module.``, peft's; adapter parts kept)."""
    for prefix in _WRAPPER_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def display_name(name: str) -> str:
    """A module name as a user writes it in a rule: without peft's prefix and adapter internals."""
    name = short_name(name)
    for part in _ADAPTER_PARTS:
        cut = name.find(part)
        if cut >= 0:
            name = name[:cut]
    return name


def family_default_rules(family: str, mode: str) -> list[Rule]:
    """Defaults per model family and precision mode. Softmax, log-softmax and cross-entropy already run
    in fp32 under autocast, and the HF RMSNorms upcast internally, so only whole branches need rules."""
    if family == "glm4v" and mode == "fp16":
        return [
            Rule(
                r"(^|\.)visual$",
                "float32",
                "float32",
                "family default (glm4v, fp16)",
                "the vision tower shares no loss-scale tuning with the text decoder and its activations are not "
                "bounded for fp16's 65504 range; it is frozen under LoRA and a small share of text-heavy FLOPs",
            )
        ]
    return []


def resolve_rules(precision: PrecisionSection, family: str, mode: str) -> list[Rule]:
    """The rules a run applies: ``precision.module_rules`` in order, then the family defaults."""
    rules = [
        Rule(r.pattern, r.storage, r.compute, f"precision.module_rules[{i}]")
        for i, r in enumerate(precision.module_rules)
    ]
    if precision.family_defaults:
        rules += family_default_rules(family, mode)
    return rules


def _match(rule: Rule, name: str) -> bool:
    return bool(rule.regex.search(name) or rule.regex.search(display_name(name)))


def _map_floats(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj) if obj.is_floating_point() else obj
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_map_floats(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map_floats(o, fn) for o in obj]
    if isinstance(obj, dict):  # transformers' ModelOutput is a dict: update in place keeps its type
        for k in list(obj.keys()):
            obj[k] = _map_floats(obj[k], fn)
        return obj
    return obj


def _first_float_dtype(args, kwargs) -> torch.dtype | None:
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v.dtype
    return None


def run_in_fp32(module: torch.nn.Module, device_type: str) -> None:
    """Make ``module`` compute in fp32 whatever autocast says. Without an active autocast (pure-bf16)
    the outputs go back to the caller's dtype, because downstream bf16 weights cannot take fp32 inputs;
    under autocast they stay fp32 and autocast casts them where the next matmul needs it."""
    if getattr(module, "_workbench_fp32_forward", None) is not None:
        return
    inner = module.forward

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        caller = None if torch.is_autocast_enabled(device_type) else _first_float_dtype(args, kwargs)
        with torch.autocast(device_type, enabled=False):
            out = inner(*_map_floats(args, lambda t: t.float()), **_map_floats(kwargs, lambda t: t.float()))
        if caller is not None and caller != torch.float32:
            out = _map_floats(out, lambda t: t.to(caller))
        return out

    module._workbench_fp32_forward = inner
    module.forward = forward


@dataclass
class RulesApplied:
    """What ``apply_module_rules`` did: one report per rule (the ``precision_rules`` event), and the
    modules that must compute in fp32 (a strategy that casts parameters per module must leave them)."""

    reports: list
    fp32_modules: list  # (name, module)


def apply_module_rules(
    model: torch.nn.Module, rules: list[Rule], device_type: str, strategy: str = "none"
) -> RulesApplied:
    """Apply ``rules`` (first match wins; a matched module's descendants are not matched again) to a
    model no strategy has wrapped yet. Raises ConfigError for a rule the strategy cannot honour."""
    matched: dict[int, list[tuple[str, torch.nn.Module]]] = {i: [] for i in range(len(rules))}
    claimed: list[str] = []
    for name, module in model.named_modules():
        if not name or any(name.startswith(c + ".") for c in claimed):
            continue
        for i, rule in enumerate(rules):
            if _match(rule, name):
                matched[i].append((name, module))
                claimed.append(name)
                break
    reports, fp32_modules = [], []
    for i, rule in enumerate(rules):
        report = {
            "source": rule.source,
            "pattern": rule.pattern,
            "storage": rule.storage,
            "compute": rule.compute,
            "why": rule.why,
            "module_count": len(matched[i]),
            "modules": [display_name(n) for n, _ in matched[i][:20]],
            "params_recast": 0,
            "trained_params_recast": 0,
        }
        if strategy == "deepspeed" and matched[i]:
            if rule.source.startswith("precision"):
                raise ConfigError(
                    [
                        (
                            rule.source,
                            f"matches {display_name(matched[i][0][0])}, but DeepSpeed casts the whole "
                            "model to its fp16/bf16 dtype: module rules need strategy none, ddp or fsdp",
                        )
                    ]
                )
            reports.append(
                {**report, "module_count": 0, "modules": [], "skipped": "DeepSpeed casts the whole model to fp16/bf16"}
            )
            continue
        target = rule.target_storage()
        for name, module in matched[i]:
            for p in module.parameters():
                # a quantized base's weights (quantization.base: uint8 / int8 storage) are no floats to recast
                if target is not None and p.is_floating_point() and p.dtype != target:
                    p.data = p.data.to(target)
                    report["params_recast"] += p.numel()
                    report["trained_params_recast"] += p.numel() if p.requires_grad else 0
            if rule.compute == "float32":
                run_in_fp32(module, device_type)
                for layer in module.modules():  # a 4-bit layer dequantizes to its compute dtype, not its input's
                    if hasattr(layer, "compute_dtype") and type(layer.weight).__name__ == "Params4bit":
                        layer.compute_dtype = torch.float32
                fp32_modules.append((name, module))
        reports.append(report)
    return RulesApplied(reports, fp32_modules)
