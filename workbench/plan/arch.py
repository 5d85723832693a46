"""What the planner knows about a model: its config, and a parameter census of the model built on
the meta device (no weights, no memory) and wrapped with the project's real ``apply_lora``.

Counting from the built module rather than from closed-form formulas is what makes the model-state
prediction exact: tied embeddings count once (``model.parameters()`` de-duplicates them), biases,
norms, peft's exclusion of the vision tower and any quirk of a new architecture come for free.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import ConfigError, LoraSection, PrecisionSection, QuantizationSection
from ..models.groups import module_group
from ..models.quantize import quantization_targets, quantized_data_bytes, quantized_weight_bytes
from ..precision import PrecisionPolicy

# SmolLM2-135M-Instruct's config.json, so the default model plans without fetching its wheel.
SMOLLM2_CONFIG = {
    "model_type": "llama",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "attention_bias": False,
    "mlp_bias": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
}

PRESETS = {
    "autoglm-phone-9b": "AutoGLM-Phone-9B: GLM-4.1V architecture, transformers' Glm4vConfig() defaults (10.29 B params, 0.89 B vision)",
    "smollm2-135m-instruct": "SmolLM2-135M-Instruct (the default model; LlamaForCausalLM, 134.5 M params, tied embeddings)",
    "tiny-glm4": "random 2-layer GLM-4 text model (tests)",
    "tiny-glm4v": "random 2-layer GLM-4.1V model (tests)",
    "tiny-glm4v-agent": "random 4-layer GLM-4.1V with a tokenizer fitted on phone-agent episodes",
}
# AutoGLM-Phone-9B's architecture as GLM-4.1V-9B's published config.json states it: transformers' Glm4vConfig() widths
# and token ids, with its rotary settings. Glm4vConfig() alone leaves partial_rotary_factor at 1.0 beside the default
# mrope_section [8, 12, 12] (which assumes 0.5): its text decoder's forward then fails ("split_sizes ... sum exactly to
# 64"); `workbench train --dry-run` found it running the model on the meta device. No parameter depends on it.
AUTOGLM_PHONE_9B_TEXT = {
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "mrope_section": [8, 12, 12],
    },
    "eos_token_id": [151329, 151336, 151338],
    "pad_token_id": 151329,
}


def autoglm_phone_9b_config():
    """The transformers config of AutoGLM-Phone-9B (``AUTOGLM_PHONE_9B_TEXT`` over Glm4vConfig()'s defaults)."""
    from transformers import Glm4vConfig

    text = {**Glm4vConfig().text_config.to_dict(), **AUTOGLM_PHONE_9B_TEXT}
    return Glm4vConfig(text_config=text, architectures=["Glm4vForConditionalGeneration"])


ALIASES = {
    "zai-org/autoglm-phone-9b": "autoglm-phone-9b",
    "glm4v": "autoglm-phone-9b",
    "default": "smollm2-135m-instruct",
}


def load_model_config(source: str):
    """A transformers config for a preset name, a hub id we know, or a local directory with config.json."""
    from transformers import AutoConfig, LlamaConfig

    key = ALIASES.get(source.lower(), source.lower())
    if key == "autoglm-phone-9b":
        return autoglm_phone_9b_config()
    if key == "smollm2-135m-instruct":
        from ..models import packaged

        cached = packaged.checkpoint_dir() / "config.json"
        if cached.is_file():
            return AutoConfig.from_pretrained(str(cached.parent))
        return LlamaConfig(**{k: v for k, v in SMOLLM2_CONFIG.items() if k != "model_type"})
    if key in ("tiny-glm4", "tiny-glm4v", "tiny-glm4v-agent"):
        from ..models import tiny

        model, _ = getattr(tiny, key.replace("-", "_"))()
        return model.config
    path = Path(source)
    if path.is_dir() and (path / "config.json").is_file():
        return AutoConfig.from_pretrained(str(path))
    if path.is_file() and path.name.endswith(".json"):
        return AutoConfig.from_pretrained(str(path.parent)) if path.name == "config.json" else _config_from_json(path)
    raise ConfigError(
        [
            (
                "--model",
                f"{source!r} is not a preset ({', '.join(PRESETS)}) nor a directory holding a "
                "config.json: give one of those (planning needs only the config, no weights)",
            )
        ]
    )


def _config_from_json(path: Path):
    from transformers import AutoConfig

    data = json.loads(path.read_text())
    return AutoConfig.for_model(data.pop("model_type"), **data)


def is_vision_language(config) -> bool:
    return hasattr(config, "vision_config") and hasattr(config, "text_config")


def text_config(config):
    return config.text_config if is_vision_language(config) else config


@dataclass(frozen=True)
class DecoderShape:
    """Dimensions of the text decoder that activations scale with."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    glm_style: bool  # GLM-4: 4 RMSNorms per layer and a fused gate_up_proj; else Llama: 2 norms, gate/up apart
    tied_embeddings: bool

    @classmethod
    def from_config(cls, config) -> DecoderShape:
        t = text_config(config)
        heads = t.num_attention_heads
        head_dim = getattr(t, "head_dim", None) or t.hidden_size // heads
        tied = bool(getattr(config, "tie_word_embeddings", False))
        return cls(
            layers=t.num_hidden_layers,
            hidden=t.hidden_size,
            heads=heads,
            kv_heads=getattr(t, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            intermediate=t.intermediate_size,
            vocab=t.vocab_size,
            glm_style=getattr(t, "model_type", "").startswith("glm"),
            tied_embeddings=tied,
        )


@dataclass(frozen=True)
class ParamInfo:
    name: str
    numel: int
    dtype: torch.dtype  # storage dtype the precision policy gives it (single process)
    trainable: bool
    group: str  # vision | embedding | lm_head | lora | decoder | other
    unit: str  # the layer (FSDP unit / ZeRO-3 gather unit) it belongs to
    reached: bool  # receives a gradient from text-only data (the vision tower does not)
    quantized: str = ""  # a quantized base's weight (quantization.base): nf4 | int8; '' for a float one
    rows: int = 0  # a quantized weight's output features (its per-row and per-block constants count with them)
    double_quant: bool = False  # nf4: the block scales quantized too

    @property
    def nbytes(self) -> int:
        if self.quantized:
            return quantized_weight_bytes(self.quantized, self.rows, self.numel // self.rows, self.double_quant)
        return self.numel * self.dtype.itemsize

    def stored(self, float_bytes: int) -> tuple[int, int, int]:
        """(elements, bytes, constant bytes) of the tensor a strategy shards: a float weight's elements at
        ``float_bytes`` each, or a quantized weight's packed codes (its constants stay whole on every rank)."""
        if not self.quantized:
            return self.numel, self.numel * float_bytes, 0
        data = quantized_data_bytes(self.quantized, self.rows, self.numel // self.rows)
        return data, data, self.nbytes - data


@dataclass(frozen=True)
class PlannedCensus:
    """Every parameter of the model as the run will hold it, counted on the meta device."""

    source: str
    model_class: str
    family: str
    params: tuple  # of ParamInfo
    shape: DecoderShape
    lora_enabled: bool

    def count(self, trainable: bool | None = None, group: str | None = None, reached: bool | None = None) -> int:
        return sum(p.numel for p in self._select(trainable, group, reached))

    def bytes(self, trainable: bool | None = None, group: str | None = None, reached: bool | None = None) -> int:
        return sum(p.nbytes for p in self._select(trainable, group, reached))

    def _select(self, trainable, group, reached):
        for p in self.params:
            if trainable is not None and p.trainable != trainable:
                continue
            if group is not None and p.group != group:
                continue
            if reached is not None and p.reached != reached:
                continue
            yield p

    @functools.cached_property
    def units(self) -> dict:
        """Parameters per sharding unit (one decoder layer or vision block each; the rest is the root)."""
        out: dict = {}
        for p in self.params:
            out[p.unit] = out.get(p.unit, 0) + p.numel
        return out

    @property
    def largest_unit(self) -> int:
        return max(self.units.values())

    @property
    def largest_layer(self) -> int:
        """Largest transformer layer/block (what FSDP gathers at once; the root unit is gathered apart)."""
        layers = [n for u, n in self.units.items() if u != "root"]
        return max(layers) if layers else self.largest_unit

    @property
    def quantized(self) -> tuple:
        """The quantized base's weights (quantization.base), in model order."""
        return tuple(p for p in self.params if p.quantized)

    def summary(self) -> dict:
        out = {
            "source": self.source,
            "class": self.model_class,
            "family": self.family,
            "total_params": self.count(),
            "trainable_params": self.count(trainable=True),
            "vision_params": self.count(group="vision"),
            "lora_params": self.count(group="lora"),
            "largest_layer_params": self.largest_layer,
        }
        if self.quantized:
            q = self.quantized
            out.update(
                quantized_base=q[0].quantized,
                quantized_params=sum(p.numel for p in q),
                quantized_bytes=sum(p.nbytes for p in q),
            )
        return out


def _unit(name: str) -> str:
    parts = name.split(".")
    for key in ("layers", "blocks"):
        if key in parts:
            i = parts.index(key)
            if i + 1 < len(parts) and parts[i + 1].isdigit():
                return ".".join(parts[: i + 2])
    return "root"


def build_meta_model(config):
    """The model class the project would load, built on the meta device (no memory, milliseconds)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    auto = AutoModelForImageTextToText if is_vision_language(config) else AutoModelForCausalLM
    with torch.device("meta"):
        return auto.from_config(config)


@functools.lru_cache(maxsize=32)
def _census_cached(
    source: str,
    lora_json: str,
    base_dtype: torch.dtype,
    trainable_dtype: torch.dtype,
    mode: str,
    precision_json: str | None,
    quantization_json: str | None = None,
) -> PlannedCensus:
    from ..models import LoadedModel, apply_lora, model_family
    from ..precision.module_rules import apply_module_rules, resolve_rules

    config = load_model_config(source)
    family = model_family(config)
    model = build_meta_model(config).to(base_dtype)  # load_base_model loads in policy.base_dtype
    quantized: dict = {}  # id(weight) -> its linear: the layers models.quantize.quantize_base replaces
    if quantization_json is not None:
        q = QuantizationSection.model_validate_json(quantization_json)
        if q.base != "none":
            quantized = {id(m.weight): m for _, m in quantization_targets(model, q.skip_modules)}
    lora = LoraSection.model_validate_json(lora_json)
    wrapped = apply_lora(LoadedModel(model, None, family, source), lora, trainable_dtype)
    if precision_json is not None:  # the run's per-module rules change storage dtypes as the engine applies them
        rules = resolve_rules(PrecisionSection.model_validate_json(precision_json), family, mode)
        apply_module_rules(wrapped, rules, "meta")
    infos = []
    for name, p in wrapped.named_parameters():  # de-duplicates tied weights, as the real model does
        name = name.removeprefix("base_model.model.")
        group = module_group(name)
        linear = quantized.get(id(p))
        extra = (
            dict(
                quantized=q.base,
                rows=linear.out_features,
                double_quant=q.double_quant and q.base == "nf4",
            )
            if linear is not None
            else {}
        )
        infos.append(
            ParamInfo(
                name=name,
                numel=p.numel(),
                dtype=p.dtype,
                trainable=p.requires_grad,
                group=group,
                unit=_unit(name),
                reached=group != "vision",
                **extra,
            )
        )
    return PlannedCensus(
        source=source,
        model_class=type(model).__name__,
        family=family,
        params=tuple(infos),
        shape=DecoderShape.from_config(config),
        lora_enabled=lora.enabled,
    )


def resolved_learning_rate(cfg, policy: PrecisionPolicy) -> float:
    """The run's peak learning rate: schedule.learning_rate, or when null the rate derived from the base model's
    parameter count (``ScheduleSection.derived_learning_rate``), counted here on the meta device. The one derivation:
    the engine resolves a run's rate through it once (run_started records it), and the DeepSpeed config exported
    from a RunConfig gets the same number."""
    if cfg.schedule.learning_rate is not None:
        return cfg.schedule.learning_rate
    counted = planned_census(cfg.model.source, cfg.lora, policy, cfg.precision)
    return cfg.schedule.derived_learning_rate(cfg.lora.enabled, counted.count() - counted.count(group="lora"))


def planned_census(
    source: str,
    lora: LoraSection,
    policy: PrecisionPolicy,
    precision: PrecisionSection | None = None,
    quantization: QuantizationSection | None = None,
) -> PlannedCensus:
    """Parameter census of ``source`` as the engine's ``build_model`` holds it under ``policy``: base,
    LoRA, (given a run's ``precision`` section) its per-module rules and (given ``quantization``) its quantized
    base's layers at their bytes with the quantization constants (``models.quantize.quantized_weight_bytes``)."""
    quant = quantization if quantization is not None and quantization.base != "none" else None
    return _census_cached(
        source,
        lora.model_dump_json(),
        policy.base_dtype,
        policy.trainable_dtype,
        policy.mode,
        precision.model_dump_json() if precision is not None else None,
        quant.model_dump_json() if quant is not None else None,
    )
