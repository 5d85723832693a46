"""The model a run trains, built in one order for every strategy:

    load the base (precision.base_dtype; quantization.base: its linear layers quantized on the device)
    -> LoRA (precision.trainable_dtype) -> per-module precision rules -> QAT fake quantization (quantization.qat)
    -> gradient checkpointing -> device

and only then does the strategy wrap it and create the optimizer, so the rules' dtypes hold for
trained and (under FSDP / ZeRO-3) sharded parameters alike, and the planner, which counts the same
steps, predicts what is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..config import ConfigError, RunConfig
from ..models import apply_lora, build_run_model, enable_gradient_checkpointing
from ..precision import PrecisionPolicy
from ..precision.module_rules import RulesApplied, apply_module_rules, resolve_rules


@dataclass
class BuiltModel:
    model: torch.nn.Module  # peft/transformers module on its device, in train mode, not yet wrapped
    tokenizer: Any
    family: str
    rules: RulesApplied
    processor: Any = None  # vision-language models: what turns rows with images into inputs
    quantized: Any = None  # quantization.base: what models.quantize.quantize_base did (the base_quantized event)


def build_model(cfg: RunConfig, precision: PrecisionPolicy, device: torch.device) -> BuiltModel:
    # the base every later path rebuilds the run's model on
    loaded = build_run_model(cfg, precision.base_dtype, compute_dtype=precision.compute_dtype, device=device)
    model = apply_lora(loaded, cfg.lora, precision.trainable_dtype)
    rules = apply_module_rules(
        model, resolve_rules(cfg.precision, loaded.family, precision.mode), precision.device_type, cfg.sharding.strategy
    )
    if cfg.quantization.qat:
        prepare_qat_for_run(model, cfg.quantization.qat)
    if cfg.model.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    model.config.use_cache = False
    model = model.to(device)
    model.train()
    return BuiltModel(model, loaded.tokenizer, loaded.family, rules, loaded.processor, loaded.quantized)


def prepare_qat_for_run(model: torch.nn.Module, scheme: str) -> None:
    """Fake-quantize for ``quantization.qat`` after the precision rules (so the fake quantizers see the storage
    dtypes training uses); a model the scheme cannot quantize is a config error naming why."""
    from ..precision.qat import prepare_qat, qat_problems

    problems = qat_problems(model, scheme)
    if problems:
        raise ConfigError([("quantization.qat", p) for p in problems])
    prepare_qat(model, scheme)
