"""`workbench export` of a run trained over a quantized base (quantization.base nf4) merges its adapter into the
dequantized base, by the same command as a LoRA run: a plain full-precision model whose logits are those of the
adapter on the dequantized base (the merge tolerance of test_export.py, 1e-4 in fp32), not those of the adapter on the
16-bit base the run never trained on (what an export that silently left the base unquantized would write: this test
fails then, checked by breaking it). The engine's checkpointing.merge_adapter merges the same way."""

from __future__ import annotations

import torch

from tests.conftest import qlora_reference

from .test_export import MERGE_TOLERANCE, _batch, _logits


def _dequantized_reference(run_dir):
    """The adapter on the base built here (tests/conftest.py: qlora_reference), its nf4 layers dequantized to fp32."""
    from workbench.models.quantize import dequantize_base

    model, tok = qlora_reference(run_dir)
    assert dequantize_base(model.get_base_model(), torch.float32) > 0
    return model, tok


def test_a_qlora_run_exports_its_adapter_merged_into_the_dequantized_base(qlora_run, tmp_path):
    from workbench.export import export
    from workbench.models import load_for_inference

    result = export(qlora_run, "merged", tmp_path / "merged")
    assert result.manifest["status"] == "passed" and result.manifest["parity"]["max_logit_diff"] < MERGE_TOLERANCE
    exported = load_for_inference(str(result.path))
    assert all(type(m) is not torch.nn.Linear or m.weight.dtype == torch.float32 for m in exported.model.modules())
    assert not any("lora" in n for n, _ in exported.model.named_parameters())
    reference, tok = _dequantized_reference(qlora_run)
    unquantized, _ = qlora_reference(qlora_run, quantized=False)
    batch = _batch(tok)
    real = batch["attention_mask"].bool()
    merged = _logits(exported.model, batch)
    assert (merged - _logits(reference, batch)).abs()[real].max() < MERGE_TOLERANCE
    # nf4 moves this model's logits by ~0.1 (measured): a thousand times the merge tolerance
    assert (merged - _logits(unquantized, batch)).abs()[real].max() > 100 * MERGE_TOLERANCE


def test_merge_adapter_at_the_end_of_a_qlora_run_merges_into_the_dequantized_base(make_cfg):
    from transformers import AutoModelForCausalLM

    from workbench import train

    r = train(make_cfg(**{"quantization.base": "nf4", "schedule.max_steps": 2, "checkpointing.merge_adapter": True}))
    merged = AutoModelForCausalLM.from_pretrained(r.run_dir / "merged")
    reference, tok = _dequantized_reference(r.run_dir)
    batch = _batch(tok)
    real = batch["attention_mask"].bool()
    assert (_logits(merged, batch) - _logits(reference, batch)).abs()[real].max() < MERGE_TOLERANCE
