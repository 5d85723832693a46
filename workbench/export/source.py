"""The run an export starts from: its saved configuration, its adapter, and the unexported model
(the base in fp32 with the adapter applied; a quantized base dequantized first), which every export is checked
against."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import ConfigError, RunConfig
from ..runs.layout import (
    ADAPTER_CONFIG,
    ADAPTER_DIR,
    CONFIG_FILE,
    TrainedWeights,
    is_run_dir,
    run_config,
    trained_weights,
)


class ExportInputError(ValueError):
    """The run, target or options asked for cannot be exported (CLI exit code 2)."""


@dataclass
class RunSource:
    run_dir: Path
    config: RunConfig
    adapter_dir: Path

    @property
    def base(self) -> str:
        return self.config.model.source


@dataclass
class Reference:
    """The unexported model: fp32 base + the run's adapter, in eval mode, plus what was loaded."""

    model: torch.nn.Module  # a peft model
    tokenizer: Any
    family: str
    base_path: str  # the directory or hub id the base was loaded from
    processor: Any = None  # a vision-language base's processor: held-out rows with screenshots become its inputs
    adapter_dir: Path | None = None  # the run's saved adapter

    def merged_copy(self) -> torch.nn.Module:
        """The adapter merged into a copy of the base, in host memory (the reference itself stays unmerged; a
        reference on a GPU is moved to the host first: two copies of it rarely fit there)."""
        return copy.deepcopy(self.model.to("cpu")).merge_and_unload()

    def adapter_and_base(self) -> AdapterAndBase:
        """The base without the adapter (a copy, in host memory) and the adapter's directory: what a GGUF LoRA is
        written from."""
        return AdapterAndBase(copy.deepcopy(self.model.to("cpu")).unload(), self.adapter_dir)


@dataclass
class AdapterAndBase:
    base: torch.nn.Module
    adapter_dir: Path


def open_run(run_dir: str | Path) -> RunSource:
    """A finished run with a LoRA adapter; ExportInputError naming what is missing otherwise."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExportInputError(f"run directory {str(run_dir)!r} does not exist")
    if not is_run_dir(run_dir):
        raise ExportInputError(f"{str(run_dir)!r} is not a run directory (it holds no {CONFIG_FILE})")
    try:
        cfg = run_config(run_dir)
    except ConfigError as err:
        raise ExportInputError(f"{run_dir / CONFIG_FILE} is not a valid run configuration: {err}") from None
    weights = trained_weights(run_dir)
    if weights is None or weights.kind != "adapter":
        adapter = run_dir / ADAPTER_DIR
        why = (
            "it was a full fine-tune (lora.enabled=false): its model/ directory is already a plain transformers model"
            if weights is not None
            else "the run has not finished (the adapter is saved at its end)"
        )
        raise ExportInputError(f"{run_dir} has no LoRA adapter ({adapter}/{ADAPTER_CONFIG}): {why}")
    return RunSource(run_dir, cfg, weights.path)


def load_reference(source: RunSource, device: str | torch.device = "cpu") -> Reference:
    """The base exactly as the run built it (``models.build_run_model``: same source and seed, fp32; a quantized base
    (quantization.base) quantized as in training, then dequantized into fp32 layers: the full-precision base the
    adapter is merged into) with the saved adapter applied, on ``device``."""
    from ..models import build_run_model

    loaded = build_run_model(
        source.config, torch.float32, TrainedWeights("adapter", source.adapter_dir), dequantized=True, device=device
    )
    loaded.model.to(device)
    return Reference(loaded.model, loaded.tokenizer, loaded.family, loaded.source, loaded.processor, source.adapter_dir)
