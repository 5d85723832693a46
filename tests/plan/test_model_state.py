"""Predicted model-state bytes equal measured bytes exactly, on real models after a real step."""

import pytest
import torch

from workbench.config import RunConfig
from workbench.engine.build import build_model
from workbench.plan import STATE_CATEGORIES, compare, measure_model_state, predict_for_run
from workbench.precision import resolve_precision, token_loss_sum


def _config(source, mode, lora, quantized="none", **quantization):
    return RunConfig.model_validate(
        {
            "model": {"source": source},
            "precision": {"mode": mode, "init_scale": 1.0},
            "lora": {"enabled": lora},
            "data": {"train": "unused.jsonl", "eval": None},
            "schedule": {"micro_batch_size": 2},
            "quantization": {"base": quantized, **quantization},
        }
    )


def _train_one_step(cfg):
    policy = resolve_precision(cfg, torch.device("cpu"))
    model = build_model(cfg, policy, torch.device("cpu")).model  # as the engine builds it, module rules included
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    scaler = policy.make_grad_scaler()
    ids = torch.randint(0, 250, (2, 12), generator=torch.Generator().manual_seed(0))
    with policy.autocast():
        logits = model(input_ids=ids).logits
    loss = token_loss_sum(logits, ids) / ids.numel()
    if scaler is None:
        loss.backward()
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return policy, model, opt  # gradients kept: measured before zero_grad


def _assert_exact(cfg):
    policy, model, opt = _train_one_step(cfg)
    measured = measure_model_state(model, opt)
    assert measured["optimizer_state"] > 0, "the optimizer step was skipped; the comparison would be vacuous"
    plan = predict_for_run(cfg, policy)
    rows = compare(plan.state, measured, STATE_CATEGORIES)
    assert [r.category for r in rows] == list(STATE_CATEGORIES)
    for r in rows:
        assert r.predicted == r.measured, f"{cfg.model.source} {policy.mode} lora={cfg.lora.enabled}: {r}"


@pytest.mark.parametrize("source", ["tiny-glm4", "tiny-glm4v"])
@pytest.mark.parametrize("mode", ["fp32", "fp16", "bf16", "pure-bf16"])
@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_tiny_models_state_exact(source, mode, lora):
    _assert_exact(_config(source, mode, lora))


@pytest.mark.parametrize("mode,lora", [("bf16", True), ("fp32", True)])
def test_default_model_state_exact(mode, lora):
    _assert_exact(_config("smollm2-135m-instruct", mode, lora))


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode,lora", [("pure-bf16", False), ("bf16", False), ("fp16", True), ("fp32", False), ("pure-bf16", True)]
)
def test_default_model_state_exact_slow(mode, lora):
    _assert_exact(_config("smollm2-135m-instruct", mode, lora))


def test_vision_tower_gets_no_state_under_text_only_data():
    cfg = _config("tiny-glm4v", "fp32", False)
    _, model, opt = _train_one_step(cfg)
    vision = [p for n, p in model.named_parameters() if ".visual." in n]
    assert vision and all(p.grad is None and p not in opt.state for p in vision)


# every kind, storage dtype and model once in the default suite; the rest of the matrix in CI's slow step
QUANTIZED_DEFAULT = {
    ("tiny-glm4", "bf16", "nf4"),
    ("tiny-glm4", "fp16", "nf4"),
    ("tiny-glm4", "fp32", "int8"),
    ("tiny-glm4v", "bf16", "int8"),
    ("tiny-glm4v", "pure-bf16", "nf4"),
}
QUANTIZED_MATRIX = [
    pytest.param(*case, marks=() if case in QUANTIZED_DEFAULT else pytest.mark.slow)
    for case in (
        (source, mode, kind)
        for source in ("tiny-glm4", "tiny-glm4v")
        for mode in ("fp32", "fp16", "bf16", "pure-bf16")
        for kind in ("nf4", "int8")
    )
]


@pytest.mark.parametrize("source,mode,quantized", QUANTIZED_MATRIX)
def test_quantized_base_state_exact(source, mode, quantized):
    """The packed weights and their quantization constants (models.quantize.quantized_weight_bytes) to the byte, in
    the census as in the memory event's weights."""
    from workbench.engine.census import parameter_census

    cfg = _config(source, mode, True, quantized)
    policy, model, opt = _train_one_step(cfg)
    measured = measure_model_state(model, opt)
    for r in compare(predict_for_run(cfg, policy).state, measured, STATE_CATEGORIES):
        assert r.predicted == r.measured, r
    rows, totals = parameter_census(model)
    assert {r["dtype"] for r in rows if r["quantized"] == "bitsandbytes"} == {quantized} and totals[quantized] > 0
    assert sum(r["bytes"] for r in rows) == measured["weights"]


def test_an_nf4_base_without_double_quant_is_planned_at_its_measured_bytes():
    """quantization.double_quant false keeps nf4's block scales in fp32 (4 bytes a block of 64, not 1 + a share of the
    nested ones and a code table a layer): the plan counts the weights the run holds, which differ from double_quant's
    (on the tiny model's small layers the tables outweigh the saving: fewer bytes without it)."""
    single, double = (_config("tiny-glm4", "bf16", True, "nf4", double_quant=flag) for flag in (False, True))
    _assert_exact(single)
    weights = {
        cfg.quantization.double_quant: predict_for_run(cfg, resolve_precision(cfg, torch.device("cpu"))).state.weights
        for cfg in (single, double)
    }
    assert weights[False] != weights[True]


@pytest.mark.slow
@pytest.mark.parametrize("quantized", ["nf4", "int8"])
def test_default_model_quantized_state_exact(quantized):
    _assert_exact(_config("smollm2-135m-instruct", "bf16", True, quantized))
