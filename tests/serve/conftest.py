"""Servers shared by the serve tests (started once per session on 127.0.0.1, free ports)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # helpers next to the tests (no tests/__init__.py here)

SMALL = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def tiny_server():
    from workbench.serve import start_server

    # default_max_tokens keeps requests without max_tokens (the fuzzer sends many) short
    with start_server("tiny-glm4", default_max_tokens=8, max_batch=8, threads=1) as srv:
        yield srv


@pytest.fixture(scope="session")
def scripted_server():
    from scripted import scripted_model
    from workbench.serve import start_server

    with start_server("scripted", loaded=scripted_model(), max_batch=4) as srv:
        yield srv


def make_adapter(base_source: str, out: Path, seed: int = 0, run_source: str | None = None) -> Path:
    """A random non-zero LoRA adapter for ``base_source``, saved as a run directory (config.json + adapter/).
    alpha 64 (scale 8): at scale 1 a random adapter leaves SmolLM2's confident greedy answers unchanged."""
    import torch
    from peft import LoraConfig, get_peft_model

    from workbench.models import load_for_inference

    base = load_for_inference(base_source).model
    torch.manual_seed(seed)
    peft_model = get_peft_model(base, LoraConfig(r=8, lora_alpha=64, target_modules="all-linear", init_lora_weights=False))
    out.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(out / "adapter")
    (out / "config.json").write_text(json.dumps({"model": {"source": run_source or base_source}}))
    return out


@pytest.fixture(scope="session")
def small_adapter_run(tmp_path_factory) -> Path:
    return make_adapter(SMALL, tmp_path_factory.mktemp("runs") / "probe-run", seed=1)


@pytest.fixture(scope="session")
def small_server(small_adapter_run):
    from workbench.serve import start_server

    with start_server(SMALL, runs=[str(small_adapter_run)], max_batch=8, threads=1) as srv:
        yield srv
