"""quantization.base: the base's linear layers become bitsandbytes' quantized ones (vision tower, projector and lm_head
left alone), at the bytes the planner counts with, computing close to the 16-bit model; the setting's refusals."""

from __future__ import annotations

import sys

import pytest
import torch

from workbench.config import ConfigError, load_config
from workbench.models import tiny
from workbench.models.quantize import (
    dequantize_base,
    quantization_targets,
    quantize_base,
    quantized_kind,
    quantized_weight_bytes,
    stored_bytes,
)


@pytest.mark.parametrize("kind", ["nf4", "int8"])
@pytest.mark.parametrize("double_quant", [True, False])
def test_the_decoder_linears_are_quantized_at_the_bytes_the_planner_counts(kind, double_quant):
    model, _ = tiny.tiny_glm4v(dtype=torch.bfloat16)
    targets = [(n, m.out_features, m.in_features) for n, m in quantization_targets(model, ("lm_head", "visual"))]
    assert targets and all(".visual." not in n and "lm_head" not in n for n, _, _ in targets)
    report = quantize_base(model, kind, torch.bfloat16, double_quant)
    assert report.layers == len(targets) and report.weights == sum(o * i for _, o, i in targets)
    assert report.skipped and all(".visual." in n or n == "lm_head" for n in report.skipped)  # tower + projector
    kinds = {n: quantized_kind(m) for n, m in model.named_modules()}
    assert {kinds[n] for n, _, _ in targets} == {kind}
    assert not any(kinds[n] for n in report.skipped)
    seen: set = set()
    measured = sum(stored_bytes(m, seen) for m in model.modules() if quantized_kind(m))
    predicted = sum(quantized_weight_bytes(kind, o, i, double_quant) for _, o, i in targets)
    assert measured == predicted == report.bytes_after
    # nf4: ~0.52 byte a weight with double quantization (0.56 without), plus per-layer code tables that weigh on tiny
    # layers; int8: 1 byte + an fp32 scale per row
    assert report.bytes_after < (0.35 if kind == "nf4" else 0.6) * report.bytes_before
    assert model.is_loaded_in_4bit if kind == "nf4" else model.is_loaded_in_8bit  # what peft reads


def test_the_quantized_model_computes_close_to_the_16_bit_one_and_dequantizes_to_plain_layers():
    ids = torch.randint(0, 250, (2, 16), generator=torch.Generator().manual_seed(0))
    model, _ = tiny.tiny_glm4(dtype=torch.bfloat16)
    model = model.float()
    with torch.no_grad():
        full = model(input_ids=ids).logits
    quantize_base(model, "nf4", torch.float32)
    with torch.no_grad():
        quantized = model(input_ids=ids).logits
    error = (quantized - full).abs().max()
    assert 1e-3 < error < 0.5 * full.abs().max(), error  # nf4's rounding shows, and stays a rounding
    assert dequantize_base(model, torch.float32) == 12
    assert not any(quantized_kind(m) for m in model.modules()) and not model.is_loaded_in_4bit
    with torch.no_grad():
        dequantized = model(input_ids=ids).logits
    torch.testing.assert_close(dequantized, quantized, rtol=0, atol=1e-5)  # the same weights, now plain fp32


def test_every_refusal_names_its_field_and_the_fix_at_once(monkeypatch):
    with pytest.raises(ConfigError) as err:
        load_config(
            None,
            {
                "quantization.base": "int8",
                "lora.enabled": False,
                "quantization.qat": "int8-weight",
                "quantization.skip_modules": ["lm_head", "visual.*"],
            },
        )
    problems = dict(err.value.problems)
    assert "full fine-tune" in problems["quantization.base"] and "enable lora" in problems["quantization.base"]
    assert "set one of them" in problems["quantization.qat"]
    assert "'visual.*' is not a module name" in problems["quantization.skip_modules"]
    with pytest.raises(ConfigError) as err:
        load_config(
            None,
            {"quantization.base": "int8", "sharding.strategy": "fsdp", "sharding.nproc_per_node": 2, "device": "cpu"},
        )
    assert "no attribute 'CB'" in dict(err.value.problems)["sharding.strategy"]
    assert (
        load_config(
            None,
            {"quantization.base": "nf4", "sharding.strategy": "fsdp", "sharding.nproc_per_node": 2, "device": "cpu"},
        ).quantization.base
        == "nf4"
    )  # FSDP2 shards nf4 (trains: tests/distributed)
    with pytest.raises(ConfigError, match="rl.rollout_engine: vllm would sample with the adapter on the 16-bit base"):
        load_config(None, {"quantization.base": "nf4", "training.method": "grpo", "rl.rollout_engine": "vllm"})
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    with pytest.raises(ConfigError) as err:
        load_config(None, {"quantization.base": "nf4"})
    assert "pip install 'bitsandbytes" in dict(err.value.problems)["quantization.base"]
    assert load_config(None, {}).quantization.base == "none"  # off needs no bitsandbytes


def test_the_panel_offers_the_setting_and_shows_its_refusal_inline():
    from workbench.ui.config_panel import ConfigPanel

    panel = ConfigPanel()
    assert panel.editors["quantization.base"].widget.options == ("none", "nf4", "int8")
    panel.form.set("lora.enabled", False)
    panel.form.set("quantization.base", "nf4")
    assert any("full fine-tune" in p for p in panel.form.field_problems("quantization.base"))


def test_a_qlora_run_of_glm4v_by_default_quantizes_the_decoder_and_keeps_the_vision_tower_and_lm_head():
    """quantization.base nf4 with nothing else set: the run's model (as training, serving and chat build it) has its
    decoder's linear layers in nf4 and GLM-4.1V's vision tower, its projector and the output layer as they were."""
    from workbench.models import build_run_model

    cfg = load_config(None, {"model.source": "tiny-glm4v", "quantization.base": "nf4"})
    model = build_run_model(cfg, torch.float32).model
    kinds = {
        n: quantized_kind(m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) or quantized_kind(m)
    }
    vision = {n: k for n, k in kinds.items() if ".visual." in f".{n}."}
    decoder = {n: k for n, k in kinds.items() if ".layers." in n and n not in vision}
    assert vision and set(vision.values()) == {""}, {n: k for n, k in vision.items() if k}
    assert decoder and set(decoder.values()) == {"nf4"}
    assert kinds["lm_head"] == ""
