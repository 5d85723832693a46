"""Inference memory: the weight-format rule against torchao's saved tensors and SmolLM2's measured exports,
the KV cache and screenshot arithmetic, bf16 on a T4, and the CLI."""

import json
import tempfile

import pytest
import torch
from safetensors import safe_open

from workbench.cli.main import main
from workbench.config import ConfigError
from workbench.models import tiny
from workbench.plan.factcheck import SMOLLM2_MEASURED_MB
from workbench.plan.inference import RTX4090, T4, inference_table, linear_split, predict_inference, weight_bytes


def _tensor_bytes(path) -> int:
    with safe_open(path, "pt") as f:
        return sum(f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in f.keys())


def test_int8_rule_equals_torchaos_saved_tensors_on_tiny_glm4():
    from torchao.quantization import Int8WeightOnlyConfig
    from transformers import Glm4ForCausalLM, TorchAoConfig

    model, _ = tiny.tiny_glm4()
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(f"{d}/fp32")
        q = Glm4ForCausalLM.from_pretrained(
            f"{d}/fp32", dtype=torch.float32, quantization_config=TorchAoConfig(Int8WeightOnlyConfig())
        )
        q.save_pretrained(f"{d}/int8")  # what `workbench export --target int8` does
        assert _tensor_bytes(f"{d}/fp32/model.safetensors") == weight_bytes("tiny-glm4", "fp32")
        assert _tensor_bytes(f"{d}/int8/model.safetensors") == weight_bytes("tiny-glm4", "int8", torch.float32)


def test_tiny_glm4_split_by_hand():
    # per layer: q 64x64, k 32x64, v 32x64, o 64x64, gate_up 256x64, down 64x128 (lm_head stays unquantized)
    s = linear_split("tiny-glm4")
    assert s.linear_weights == 2 * (4096 + 2048 + 2048 + 4096 + 16384 + 8192)
    assert s.linear_rows == 2 * (64 + 32 + 32 + 64 + 256 + 64)
    assert s.total == 115520
    int4 = weight_bytes("tiny-glm4", "int4", torch.bfloat16)
    assert int4 == s.linear_weights // 2 + (s.linear_weights // 128) * 4 + s.other * 2


def test_weight_rule_predicts_smollm2_export_sizes():
    """docs/results/2026-11-30-export-smollm2.md measured the export directories (weights + ~3.5 MB of tokenizer and config files)."""
    predicted = {
        "fp32": weight_bytes("smollm2-135m-instruct", "fp32"),
        "bf16": weight_bytes("smollm2-135m-instruct", "bf16"),
        "int8": weight_bytes("smollm2-135m-instruct", "int8", torch.float32),
    }
    for fmt, bytes_ in predicted.items():
        files = SMOLLM2_MEASURED_MB[fmt] - bytes_ / 1e6
        assert 2.5 < files < 5.0, (fmt, bytes_ / 1e6, SMOLLM2_MEASURED_MB[fmt])


def test_autoglm_inference_on_t4_and_4090():
    rows = {(r.devices.name, r.fmt): r for r in inference_table()}
    t4_bf16 = rows[(T4.name, "bf16")]
    assert not t4_bf16.fits and "no bf16" in t4_bf16.refused
    assert not rows[(T4.name, "fp16")].fits and rows[(T4.name, "int8")].fits and rows[(T4.name, "int4")].fits
    assert rows[(RTX4090.name, "bf16")].fits
    r = rows[(RTX4090.name, "bf16")]
    assert r.seq_len == 4096 + 3354 + 2
    assert r.gpu["kv_cache"] == 2 * 40 * 2 * 128 * r.seq_len * 2  # K and V, 40 layers, 2 KV heads of 128, 16-bit
    assert r.gpu["image_features"] == 3354 * 4096 * 2
    totals = [rows[(RTX4090.name, f)].total for f in ("int4", "int8", "bf16")]
    assert totals == sorted(totals)
    assert (
        0.5 < rows[(RTX4090.name, "int8")].gpu["weights"] / r.gpu["weights"] < 0.6
    )  # embeddings + lm_head stay 16-bit
    text_only = predict_inference("autoglm-phone-9b", "bf16", RTX4090, images_per_row=0)
    assert text_only.total < r.total and "image_features" not in text_only.gpu
    with pytest.raises(ConfigError, match="--weights"):
        predict_inference("autoglm-phone-9b", "int3", RTX4090)


def test_cli_inference(capsys):
    assert main(["plan", "--inference", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8 and {r["device"] for r in rows} == {T4.name, RTX4090.name}
    assert (
        main(
            [
                "plan",
                "--inference",
                "--devices",
                "1x16GB",
                "--weights",
                "int8",
                "--context",
                "1024",
                "--images-per-row",
                "0",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "int8" in out and "1,024 text tokens" in out and "screenshot" not in out.split("\n")[0]
    capsys.readouterr()
    assert main(["plan", "--inference", "--weights", "int3", "--image-size", "huge", "--context", "0"]) == 2
    err = capsys.readouterr().err
    assert "3 problem(s)" in err and all(k in err for k in ("weights: 'int3'", "image_size: 'huge'", "context:"))
    assert main(["plan", "--inference", "--model", "tiny-glm4"]) == 2  # a screenshot for a text-only model
    assert "text-only" in capsys.readouterr().err
