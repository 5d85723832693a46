"""Helpers for the serve tests."""

from __future__ import annotations

import json
from pathlib import Path

SMALL = "smollm2-135m-instruct"


def train_small_lora(runs_dir: Path, rows: list[dict], name: str, steps: int, micro_batch: int = 1) -> Path:
    """SmolLM2 + a LoRA adapter (r 16, alpha 32, lr 2e-3, fp32) trained ``steps`` steps on ``rows`` (chat rows) until
    it answers them; the run directory."""
    from workbench.config import load_config
    from workbench.training import train

    from ..conftest import tiny_run_overrides, write_jsonl

    runs_dir.mkdir(parents=True, exist_ok=True)
    data = write_jsonl(runs_dir / f"{name}-rows.jsonl", [json.dumps(r) for r in rows])
    overrides = {
        "model.source": SMALL,
        "data.train": str(data),
        "data.max_length": 256,
        "schedule.max_steps": steps,
        "schedule.micro_batch_size": micro_batch,
        "schedule.learning_rate": 2e-3,
        "lora.r": 16,
        "lora.alpha": 32,
        "output.run_name": name,
    }
    return train(load_config(None, tiny_run_overrides(runs_dir, **overrides))).run_dir


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
