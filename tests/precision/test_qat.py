"""Quantization-aware training (quantization.qat): prepare -> train -> convert on tiny GLM-4 with LoRA.

Tolerance: the converted model must compute exactly what the fake-quantized one did (torchao's convert
stores the integer grid the fake quantizer rounded to, with the same scales): max |logit diff| <= 1e-5."""

from __future__ import annotations

import pytest
import torch

from workbench.events import read_events

CONVERT_TOLERANCE = 1e-5


def _events(run_dir, kind):
    events, _ = read_events(run_dir / "events.jsonl", 0, typed=False)
    return [e for e in events if e["type"] == kind]


def test_qat_run_trains_converts_and_shows_in_the_census(make_cfg):
    from workbench.training import train

    cfg = make_cfg(
        **{
            "quantization.qat": "int8-dynamic",
            "schedule.max_steps": 8,
            "data.eval": "data_samples/identity/heldout.jsonl",
        }
    )
    result = train(cfg)
    # it learns through the fake quantizers: ~0.15 nats from the first 3 steps' mean to the last 3's (measured)
    losses = result.losses
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.1, losses
    censuses = _events(result.run_dir, "census")
    first, last = censuses[0]["rows"], censuses[-1]["rows"]
    fake = [r for r in first if r["quantized"] == "fake-quant"]
    assert fake and {r["group"] for r in fake} == {"decoder"} and not any(r["trainable"] for r in fake)
    assert not any(r["quantized"] for r in first if r["group"] in ("lora", "embeddings", "lm_head"))
    converted = [r for r in last if r["quantized"] not in ("", "fake-quant")]
    assert converted and not any(r["quantized"] == "fake-quant" for r in last)
    # int8 weights + scales: about a quarter of the fp32 bytes of the same weights
    weight_count = sum(r["count"] for r in converted)
    assert sum(r["bytes"] for r in converted) < 0.35 * 4 * weight_count
    (event,) = _events(result.run_dir, "qat_converted")
    assert event["scheme"] == "int8-dynamic" and event["layers"] == 12  # 2 layers x (q, k, v, o, gate_up, down)
    assert event["max_logit_diff"] <= CONVERT_TOLERANCE and event["greedy_agreement"] == 1.0
    assert (result.run_dir / "adapter" / "adapter_config.json").is_file()
    finished = _events(result.run_dir, "run_finished")
    assert finished and finished[0]["time"] >= event["time"]


@pytest.mark.parametrize("scheme", ["int8-weight", "int8-dynamic", "int4-weight"])
def test_converted_model_equals_fake_quantized_model(scheme):
    from workbench.config import LoraSection, ModelSection
    from workbench.models import apply_lora, load_base_model
    from workbench.precision.qat import convert_qat, prepare_qat

    model = apply_lora(load_base_model(ModelSection(source="tiny-glm4"), torch.float32), LoraSection(), torch.float32)
    for name, p in model.named_parameters():
        if "lora_B" in name:  # a trained-looking adapter, so its branch takes part
            torch.nn.init.normal_(p, std=0.05)
    model.eval()
    ids = torch.randint(0, 256, (2, 24))
    with torch.no_grad():
        plain = model(input_ids=ids).logits
        assert prepare_qat(model, scheme) == 12
        fake = model(input_ids=ids).logits
        assert convert_qat(model, scheme) == 12
        converted = model(input_ids=ids).logits
    assert (fake - plain).abs().max() > 1e-3  # the fake quantizers do round
    assert (converted - fake).abs().max() <= CONVERT_TOLERANCE


def test_qat_is_refused_with_a_reason_where_it_cannot_apply(make_cfg):
    from workbench.config import ConfigError
    from workbench.precision.qat import qat_problems

    with pytest.raises(ConfigError) as err:
        make_cfg(**{"quantization.qat": "int8-dynamic", "sharding.strategy": "fsdp", "sharding.nproc_per_node": 2})
    assert any(field == "quantization.qat" and "fsdp" in msg for field, msg in err.value.problems)
    with pytest.raises(ConfigError) as err:
        make_cfg(**{"quantization.qat": "fp8"})
    assert any(field == "quantization.qat" for field, _ in err.value.problems)
    odd = torch.nn.Module()
    odd.layers = torch.nn.ModuleList([torch.nn.Linear(48, 16)])
    (problem,) = qat_problems(odd, "int4-weight")
    assert "groups of 32" in problem and "layers.0" in problem
    assert qat_problems(odd, "int8-weight") == []
