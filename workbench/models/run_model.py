"""A run's model, built one way for every path that uses it: training builds its base here, and serving a run,
evaluating it in process, exporting it, the demo and the chat panel (through the server) rebuild here the model it
trained.

A code-built base (``tiny-glm4``, ``tiny-glm4v``, ``tiny-glm4v-agent``) *is* its seed: its weights are drawn from
the run's ``schedule.seed`` as it is built, so that seed is part of which base a run trained on, and an adapter put
on a base drawn from another seed sits on weights it never saw. A base loaded from files is the same whatever the
seed. A model with no run (``load_for_inference``) is built as a run with the schema's defaults would build it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from ..config import QuantizationSection, RunConfig, config_from_dict
from ..dtypes import DTYPE_BY_NAME
from ..runs.layout import TrainedWeights
from . import packaged
from .loading import _TINY, LoadedModel, load_base_model, peft_deprecation_hidden, same_model
from .quantize import QUANTIZE_FROM, cast_unquantized, dequantize_base, is_quantized, quantize_base


def code_built(source: str) -> bool:
    """Whether ``source`` names a model whose weights are drawn from a seed (no files: the seed is the weights)."""
    return source in _TINY


def base_seed(cfg: RunConfig) -> int | None:
    """The seed the run's base weights were drawn from: its ``schedule.seed`` for a code-built base; None for a base
    loaded from files (any seed loads the same weights)."""
    return cfg.schedule.seed if code_built(cfg.model.source) else None


def base_config(source: str) -> RunConfig:
    """The configuration of a model served or measured without a run: ``source`` and the schema's defaults (its
    seed among them)."""
    return config_from_dict({"model": {"source": source}}, checks=False)


def build_run_model(
    cfg: RunConfig,
    dtype: torch.dtype,
    weights: TrainedWeights | None = None,
    adapter_name: str = "default",
    compute_dtype: torch.dtype | None = None,
    device: str | torch.device = "cpu",
    dequantized: bool = False,
) -> LoadedModel:
    """A run's model on the CPU in ``dtype``: its base built as training builds it (``cfg.model``; the global RNG
    and a code-built base seeded with ``cfg.schedule.seed``; ``cfg.quantization.base``: its linear layers quantized,
    computing in ``compute_dtype`` (default ``dtype``) and placed on ``device``; ``dequantized``: then dequantized
    into plain ``dtype`` layers, the full-precision base an export merges the adapter into), and with ``weights``
    what the run trained on it: a LoRA adapter put on that base (peft, unmerged, frozen, under ``adapter_name``; in
    eval mode) or a full fine-tune's model directory loaded in its place (same model options, its own weights; in
    eval mode)."""
    torch.manual_seed(cfg.schedule.seed)
    if weights is not None and weights.kind == "model":
        loaded = load_base_model(cfg.model.model_copy(update={"source": str(weights.path)}), dtype)
        loaded.model.eval()
        return loaded
    quant = cfg.quantization
    if quant.base == "none":
        loaded = load_base_model(cfg.model, dtype, seed=cfg.schedule.seed)
    else:
        # Quantized from the same 16-bit weights whatever dtype the run stores and computes in: training in bf16 and
        # serving in fp32 then hold the same quantized base (the rest is cast to ``dtype`` afterwards).
        loaded = load_base_model(cfg.model, QUANTIZE_FROM, seed=cfg.schedule.seed)
        loaded.quantized = quantize_base(
            loaded.model, quant.base, compute_dtype or dtype, quant.double_quant, quant.skip_modules, device
        )
        cast_unquantized(loaded.model, dtype)
        if dequantized:
            dequantize_base(loaded.model, dtype)
    if weights is not None:
        from peft import PeftModel

        with peft_deprecation_hidden():
            loaded.model = PeftModel.from_pretrained(loaded.model, str(weights.path), adapter_name=adapter_name)
        loaded.model.eval()
    return loaded


def load_for_inference(
    source: str = packaged.NAME, dtype: str = "float32", device: str | torch.device = "cpu"
) -> LoadedModel:
    """A model with no run, for generation or measuring (a base to compare with, a merged model or an export): built
    as ``build_run_model`` builds a run's base with the schema's defaults, in eval mode, on ``device`` (a caller
    wanting the GPU when one is visible passes ``hardware.resolve_device("auto")``)."""
    loaded = build_run_model(base_config(source), DTYPE_BY_NAME[dtype])
    loaded.model.eval().to(device)
    return loaded


def load_run_for_inference(run_dir: str | Path, device: str | torch.device = "cpu") -> LoadedModel:
    """The model a run trained, for generation: its model/ (a full fine-tune), or its base with its adapter merged in
    (a LoRA run; merged because unmerged adapters cost every forward; over a quantized base the adapter stays
    unmerged, as it trained: merging would quantize the merged weights again), in eval mode on ``device``. ValueError
    when the run has saved no trained weights."""
    from ..runs.layout import run_config, trained_weights

    weights = trained_weights(run_dir)
    if weights is None:
        raise ValueError(f"{run_dir} holds no trained weights (adapter/ or model/): the run is going, or ended first")
    loaded = build_run_model(run_config(run_dir), torch.float32, weights, device=device)
    if weights.kind == "adapter" and loaded.quantized is None:
        loaded.model = loaded.model.merge_and_unload()
    loaded.model.eval().to(device)
    return loaded


def merged_model(model: torch.nn.Module, adapter_dir: str | Path, dtype: torch.dtype) -> torch.nn.Module:
    """A trained peft ``model`` with its adapter (saved in ``adapter_dir``) merged into its base: peft's merge; over a
    quantized base (quantization.base) the base is first dequantized into plain ``dtype`` layers and the saved adapter
    put on it again, since peft would quantize the merged weights again. Consumes ``model``."""
    if not is_quantized(model):
        return model.merge_and_unload()
    from peft import PeftModel

    base = model.unload()
    dequantize_base(base, dtype)
    with peft_deprecation_hidden():
        return PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()


def shared_base(source: str, runs: Iterable[RunConfig]) -> RunConfig:
    """The configuration whose base one model in memory serves ``source`` as, with the adapters of ``runs`` on it:
    the first run's (it names the base's seed and model options), or ``base_config(source)`` without runs. ValueError
    when the runs need different bases: another source, or, for a code-built base, another seed."""
    runs = list(runs)
    for cfg in runs:
        problem = base_problem(cfg, source, base_seed(runs[0]), runs[0].quantization)
        if problem:
            raise ValueError(problem)
    return runs[0] if runs else base_config(source)


def base_problem(
    run: RunConfig, source: str, seed: int | None, quantization: QuantizationSection | None = None
) -> str | None:
    """Why ``run``'s adapter does not fit a base of ``source`` built with ``seed`` (None: a base from files) and, given,
    ``quantization`` (the base's ``quantization`` section), or None when it fits."""
    if not same_model(run.model.source, source):
        return f"it was trained on {run.model.source!r}, not {source!r}"
    if quantization is not None and _base_quantization(run.quantization) != _base_quantization(quantization):
        return (
            f"it was trained on a base quantized as {_quantized_as(run.quantization)}, and this base is quantized as "
            f"{_quantized_as(quantization)}: an adapter serves on the base it trained on, so serve or evaluate it "
            "on its own (one run, or runs of one quantization.base, per base)"
        )
    if base_seed(run) != seed:
        return (
            f"it was trained on {source!r} drawn with schedule.seed {base_seed(run)}, but this base was drawn "
            f"with seed {seed}: a code-built base is its seed, so serve or evaluate it on its own (one run, or "
            "runs of one seed, per base)"
        )
    return None


def _quantized_as(section: QuantizationSection) -> str:
    if section.base == "none":
        return "none (not quantized)"
    extra = f", double_quant {section.double_quant}" if section.base == "nf4" else ""
    return f"{section.base} (skip_modules {list(section.skip_modules)}{extra})"


def _base_quantization(section: QuantizationSection) -> tuple:
    """What makes two quantized bases the same (QAT is no part of the base: its adapters serve on the plain one)."""
    if section.base == "none":
        return ("none",)
    return (
        section.base,
        tuple(sorted(set(section.skip_modules))),
        section.double_quant if section.base == "nf4" else None,
    )
