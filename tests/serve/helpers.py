"""Helpers for the serve tests."""

from __future__ import annotations

import json
from pathlib import Path

SMALL = "smollm2-135m-instruct"


def make_adapter(base_source: str, out: Path, seed: int = 0, run_source: str | None = None) -> Path:
    """A random non-zero LoRA adapter for ``base_source``, saved as a run directory (config.json + adapter/).
    alpha 64 (scale 8): at scale 1 a random adapter leaves SmolLM2's confident greedy answers unchanged."""
    import torch
    from peft import LoraConfig, get_peft_model

    from workbench.models import load_for_inference

    base = load_for_inference(base_source).model
    torch.manual_seed(seed)
    peft_model = get_peft_model(
        base, LoraConfig(r=8, lora_alpha=64, target_modules="all-linear", init_lora_weights=False)
    )
    out.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(out / "adapter")
    (out / "config.json").write_text(json.dumps({"model": {"source": run_source or base_source}}))
    return out
