"""The planner's own typed options (screenshots, inference), validated like every configuration of the
project: ``workbench plan`` generates their flags from this schema and the plan panel validates its
inputs with it, so both report a bad value the same way, naming the field."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from ..config import ConfigError, LossHead, MemorySection, Section
from .images import parse_image_size
from .inference import DEFAULT_CONTEXT, WEIGHT_FORMATS


class PlanOptions(Section):
    config_title: ClassVar[str] = "plan options"
    help_command: ClassVar[str] = "workbench plan --help"

    images_per_row: int | None = Field(
        None,
        ge=0,
        le=64,
        description="Screenshots per example (vision-language models): the vision tower's "
        "activations and the image tokens the decoder sees, from the image processor's resize rule; null: 0 for "
        "training plans, 1 with --inference.",
    )
    image_size: str = Field(
        "1080x2400",
        description="WIDTHxHEIGHT of each screenshot before the image processor "
        "resizes it (1080x2400: a phone's portrait screen).",
    )
    loss_head: LossHead = Field(
        MemorySection().loss_head,
        description="The run's memory.loss_head: full (logits at every position kept), "
        "labels (only at labelled positions), chunked (no logits kept: the engine's default).",
    )
    label_tokens: int | None = Field(
        None,
        ge=1,
        description="Text tokens per example that carry a label (an answer's tokens); null: all of them. "
        "What the labels and chunked heads scale with.",
    )
    quantization_base: Literal["none", "nf4", "int8", "all"] = Field(
        "none",
        description="Training plans: the frozen base quantized (quantization.base: LoRA over an nf4 or int8 "
        "base, QLoRA), or all three; its weights at their quantized bytes, the dequantized copy of the largest "
        "layer in the activations.",
    )
    weights: str = Field(
        ",".join(WEIGHT_FORMATS),
        description=f"With --inference: weight formats, comma-separated, of {', '.join(WEIGHT_FORMATS)}.",
    )
    context: int = Field(
        DEFAULT_CONTEXT,
        ge=1,
        description="With --inference: text tokens per request (prompt + "
        "history + answer); screenshots add their image tokens.",
    )

    gguf: str | None = Field(
        None,
        description="GGUF files for llama.cpp instead of a training plan: the file of each quantization "
        "(comma-separated of f16, q8_0, q4_k_m, or all), the vision projector (mmproj) and the KV cache at "
        "--gguf-context tokens (`workbench export RUN --target gguf` writes them).",
    )
    gguf_context: int = Field(25480, ge=1, description="With --gguf: tokens of context the KV cache holds.")

    @field_validator("gguf")
    @classmethod
    def _gguf(cls, v: str | None) -> str | None:
        from .gguf import GGUF_QUANTS

        if v is None or v == "all":
            return v
        quants = [q.strip() for q in v.split(",") if q.strip()]
        if not quants or any(q not in GGUF_QUANTS for q in quants):
            raise ValueError(f"{v!r}: all, or a comma-separated list of {', '.join(GGUF_QUANTS)}")
        return ",".join(quants)

    @property
    def gguf_quants(self) -> tuple:
        from .gguf import GGUF_QUANTS

        return GGUF_QUANTS if self.gguf == "all" else tuple(self.gguf.split(","))

    @field_validator("image_size")
    @classmethod
    def _size(cls, v: str) -> str:
        try:
            parse_image_size(v)
        except ConfigError as err:
            raise ValueError(err.problems[0][1]) from None
        return v

    @field_validator("weights")
    @classmethod
    def _formats(cls, v: str) -> str:
        formats = [f.strip() for f in v.split(",") if f.strip()]
        bad = [f for f in formats if f not in WEIGHT_FORMATS]
        if bad or not formats:
            raise ValueError(f"{v!r}: a comma-separated list of {', '.join(WEIGHT_FORMATS)}")
        return ",".join(formats)

    @property
    def formats(self) -> tuple:
        return tuple(self.weights.split(","))

    @property
    def quantized_bases(self) -> tuple:
        from ..config import QUANTIZED_BASES

        return QUANTIZED_BASES if self.quantization_base == "all" else (self.quantization_base,)

    def images(self, inference: bool = False) -> int:
        return (1 if inference else 0) if self.images_per_row is None else self.images_per_row
