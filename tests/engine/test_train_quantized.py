"""Training over a quantized base (quantization.base): the precision machinery works over it as over a 16-bit base:
fp16 autocast with the GradScaler and its overflow events, gradient checkpointing, accumulation and every loss head;
the run's events say what was quantized and count it."""

from __future__ import annotations

import pytest
import torch

from workbench import train
from workbench.events import iter_events


def events_of(result, kind):
    return [e for e in iter_events(result.run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


def test_fp16_with_the_grad_scaler_checkpointing_and_accumulation_over_an_nf4_base(make_cfg):
    """A huge initial loss scale overflows fp16 gradients; the scaler skips those steps (overflow events), backs off
    and the run trains on: over the quantized base as over a 16-bit one (tests/engine/test_train.py)."""
    r = train(
        make_cfg(
            **{
                "quantization.base": "nf4",
                "precision.mode": "fp16",
                "precision.init_scale": 2.0**20,
                "model.gradient_checkpointing": True,
                "schedule.micro_batch_size": 2,
                "schedule.grad_accum_steps": 2,
                "memory.loss_head": "labels",
                "schedule.max_steps": 8,
                "data.max_length": 40,
                "diagnosis.enabled": False,  # attribution: test_diagnosis.py
                "schedule.learning_rate": 1e-2,
                "lora.dropout": 0.0,
            }
        )
    )
    overflows = events_of(r, "overflow")
    assert len(overflows) >= 3 and r.skipped_steps == len(overflows)
    assert all(o.scale_after == o.scale_before * 0.5 for o in overflows)
    steps = [s for s in events_of(r, "step") if not s.skipped]
    assert steps[-1].loss_scale < 2.0**20 and steps[-1].loss < steps[0].loss - 0.05, [s.loss for s in steps]
    quantized = events_of(r, "base_quantized")[0]
    assert quantized.kind == "nf4" and quantized.layers == 12 and quantized.compute_dtype == "float16"
    # a tiny layer's code tables weigh: 0.35 of bf16 here, 0.26 on the 9B (docs/results/2026-12-06-qlora.md)
    assert quantized.skipped == ["lm_head"] and quantized.bytes_after < 0.4 * quantized.bytes_before
    census = events_of(r, "census")[-1]
    nf4 = [row for row in census.rows if row["dtype"] == "nf4"]
    assert nf4 and all(row["group"] == "decoder" and not row["trainable"] for row in nf4)
    assert sum(row["bytes"] for row in nf4) == quantized.bytes_after
    plan = events_of(r, "plan")[0].plan
    assert events_of(r, "memory")[-1].params_bytes == plan["model_state"]["weights"]
    # workbench report: the quantized base as measured beside the plan, and the weights to the byte
    from workbench.plan.report import quantized_base_line, run_report

    mib = f"{quantized.bytes_after / 2**20:,.2f} MiB"
    assert quantized_base_line(r.run_dir).startswith("quantized base nf4: 12 linear layers, 73,728 weights")
    assert f"{mib} measured, {mib} planned" in quantized_base_line(r.run_dir)
    assert next(row for row in run_report(r.run_dir)[0] if row.category == "weights").error == 0


def _gradients(quantized: str, ckpt: bool, head: str) -> tuple[float, dict]:
    """The loss and the LoRA gradients of one fp32 micro-batch over a tiny GLM-4 built as a run builds it."""
    from workbench.config import RunConfig
    from workbench.engine.build import build_model
    from workbench.forward import batch_loss_sum
    from workbench.precision import resolve_precision

    cfg = RunConfig.model_validate(
        {
            "model": {"source": "tiny-glm4", "gradient_checkpointing": ckpt},
            "precision": {"mode": "fp32"},
            "lora": {"dropout": 0.0},
            "data": {"train": "unused.jsonl", "eval": None},
            "quantization": {"base": quantized},
            "memory": {"loss_head": head, "loss_chunk_tokens": 7},
        }
    )
    policy = resolve_precision(cfg, torch.device("cpu"))
    model = build_model(cfg, policy, torch.device("cpu")).model
    ids = torch.randint(0, 250, (2, 24), generator=torch.Generator().manual_seed(0))
    labels = ids.clone()
    labels[:, :10] = -100  # a prompt without labels: the heads differ in what they project
    loss = batch_loss_sum(model, {"input_ids": ids, "labels": labels}, policy.autocast, cfg.memory)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("quantized", ["nf4", "int8"])
def test_checkpointing_and_every_loss_head_give_the_same_gradients_over_a_quantized_base(quantized):
    loss, grads = _gradients(quantized, False, "full")
    for ckpt, head in ((True, "full"), (False, "labels"), (True, "chunked")):
        other_loss, other = _gradients(quantized, ckpt, head)
        assert other_loss == pytest.approx(loss, rel=1e-5), (ckpt, head)
        for n in grads:  # fp32 sums in another order
            torch.testing.assert_close(other[n], grads[n], rtol=1e-4, atol=1e-6, msg=f"{n} ckpt={ckpt} head={head}")
    plain_loss, _ = _gradients("none", False, "full")
    assert abs(plain_loss - loss) > 1e-4  # the quantized base is not the 16-bit one


def test_the_quantized_layers_compute_in_the_policys_dtype_whatever_the_base_is_stored_in():
    """precision.mode bf16 with model.dtype float32 (the base stored in fp32, matmuls autocast to bf16): the nf4 layers
    dequantize to bf16 for each matmul, as the policy computes, and the base_quantized event says so."""
    from workbench.config import load_config
    from workbench.engine.build import build_model
    from workbench.models.quantize import quantized_kind
    from workbench.precision import resolve_precision

    cfg = load_config(
        None,
        {"model.source": "tiny-glm4", "quantization.base": "nf4", "precision.mode": "bf16", "model.dtype": "float32"},
    )
    policy = resolve_precision(cfg, torch.device("cpu"))
    assert policy.base_dtype == torch.float32 and policy.compute_dtype == torch.bfloat16
    built = build_model(cfg, policy, torch.device("cpu"))
    layers = [m for m in built.model.modules() if quantized_kind(m) == "nf4"]
    assert layers and {m.compute_dtype for m in layers} == {torch.bfloat16}
    assert built.quantized.compute_dtype == "bfloat16"
