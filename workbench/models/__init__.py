"""Model sources (built-in, local, hub), LoRA wrapping, gradient checkpointing."""

from ..user_output import hide_import_chatter
from . import packaged, tiny
from .groups import GROUPS, module_group
from .loading import (
    BUILTIN,
    LoadedModel,
    apply_lora,
    canonical_model,
    enable_gradient_checkpointing,
    fetch_hub_weights,
    list_models,
    load_base_model,
    load_tokenizer,
    lora_targets,
    model_family,
    peft_deprecation_hidden,
    pretrained_class,
    same_model,
)
from .run_model import (
    base_config,
    base_problem,
    base_seed,
    build_run_model,
    code_built,
    load_for_inference,
    load_run_for_inference,
    merged_model,
    shared_base,
)

__all__ = [
    "packaged",
    "tiny",
    "GROUPS",
    "module_group",
    "BUILTIN",
    "LoadedModel",
    "apply_lora",
    "canonical_model",
    "fetch_hub_weights",
    "same_model",
    "enable_gradient_checkpointing",
    "list_models",
    "load_base_model",
    "load_for_inference",
    "load_run_for_inference",
    "load_tokenizer",
    "lora_targets",
    "model_family",
    "peft_deprecation_hidden",
    "pretrained_class",
    "base_config",
    "base_problem",
    "base_seed",
    "build_run_model",
    "code_built",
    "merged_model",
    "shared_base",
]

hide_import_chatter()  # before anything here imports transformers' model classes
