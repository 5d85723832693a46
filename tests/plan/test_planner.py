"""Planner figures: hand-computed counts, framework sharding rules, monotonicity, API and CLI."""

import json

import pytest
import torch

from workbench.cli.main import main
from workbench.config import ConfigError, LoraSection, RunConfig
from workbench.plan import DeviceSet, Setting, compare, planned_census, policy_for, predict, predict_for_run
from workbench.plan.planner import GiB, plan_matrix
from workbench.precision import resolve_precision

FULL = LoraSection(enabled=False)

# tiny-glm4 by hand: vocab 320, hidden 64, intermediate 128, 2 layers, 4 heads, 2 kv heads, head_dim 16.
# layer: q 64*64+64, k 64*32+32, v 64*32+32, o 64*64, gate_up 64*256, down 128*64, 4 norms * 64
TINY_LAYER = (4096 + 64) + (2048 + 32) * 2 + 4096 + 16384 + 8192 + 4 * 64
TINY_TOTAL = 2 * TINY_LAYER + 320 * 64 * 2 + 64  # + embed, untied lm_head, final norm
# LoRA r=16 on every decoder linear: r*(in+out)
TINY_LORA = 2 * 16 * ((64 + 64) + (64 + 32) * 2 + (64 + 64) + (64 + 256) + (128 + 64))


def test_tiny_hand_computed_counts_and_bytes():
    c = planned_census("tiny-glm4", FULL, policy_for("fp32", FULL))
    assert c.count() == TINY_TOTAL == 115520
    n_tensors = sum(1 for p in c.params)
    p = predict(
        "tiny-glm4",
        Setting("fp32", "none", lora=False, world_size=1, micro_batch=1, seq_len=8, gradient_checkpointing=False),
        lora=FULL,
    )
    assert p.state.weights == 4 * TINY_TOTAL
    assert p.state.gradients == 4 * TINY_TOTAL
    assert p.state.optimizer_state == 8 * TINY_TOTAL + 4 * n_tensors
    assert p.state.master_weights == 0
    lora = LoraSection(r=16)
    c = planned_census("tiny-glm4", lora, policy_for("bf16", lora))
    assert c.count(group="lora") == TINY_LORA == 30720
    p = predict("tiny-glm4", Setting("bf16", "none", lora=True, micro_batch=1, seq_len=8), lora=lora)
    assert p.state.weights == 2 * TINY_TOTAL + 4 * TINY_LORA  # bf16 frozen base, fp32 adapters
    assert p.state.gradients == 4 * TINY_LORA


def test_autoglm_preset_is_10_29b_with_0_89b_vision():
    c = planned_census("autoglm-phone-9b", FULL, policy_for("bf16", FULL))
    assert round(c.count() / 1e9, 2) == 10.29
    assert round(c.count(group="vision") / 1e9, 2) == 0.89


def test_zero3_over_two_ranks_holds_half_the_parameters():
    lora = LoraSection()
    c = planned_census("autoglm-phone-9b", FULL, policy_for("bf16", FULL))
    for strategy, stage in (("deepspeed", 3), ("fsdp", 3)):
        p = predict("autoglm-phone-9b", Setting("bf16", strategy, stage, "none", False, 2, 1, 512, True), lora=FULL)
        full_lowp = c.count() * (2 if strategy == "deepspeed" else 4)  # DS: bf16 module; FSDP2: fp32 shards
        assert abs(p.state.weights - full_lowp / 2) <= 0.005 * full_lowp, (strategy, p.state.weights / GiB)
    p1 = predict("autoglm-phone-9b", Setting("bf16", "deepspeed", 1, "none", False, 2, 1, 512, True), lora=FULL)
    assert p1.state.weights == c.count() * 2  # stage 1 partitions optimizer state only
    assert p1.state.optimizer_state == -(-c.count() * 8 // 2) and p1.state.master_weights == -(-c.count() * 4 // 2)
    del lora


def _p(**kw):
    base = dict(
        precision="bf16",
        strategy="deepspeed",
        stage=3,
        offload="none",
        lora=False,
        world_size=2,
        micro_batch=1,
        seq_len=1024,
        gradient_checkpointing=True,
    )
    base.update(kw)
    return predict("autoglm-phone-9b", Setting(**base), lora=LoraSection())


def test_monotonicity():
    none, opt, both = _p(), _p(offload="optimizer"), _p(offload="optimizer+params")
    assert none.gpu_total > opt.gpu_total > both.gpu_total
    assert none.host_total < opt.host_total < both.host_total
    z1, z2, z3 = _p(stage=1), _p(stage=2), _p(stage=3)
    assert z1.state.total > z2.state.total > z3.state.total
    assert _p(gradient_checkpointing=False).activations["peak"] > _p().activations["peak"]
    assert _p(micro_batch=2).activations["peak"] > _p().activations["peak"]
    assert _p(seq_len=2048).activations["peak"] > _p().activations["peak"]
    assert _p(lora=True).gpu_total < _p().gpu_total
    f3, f2 = _p(strategy="fsdp", stage=3), _p(strategy="fsdp", stage=2)
    assert f2.gpu["sharding_buffers"] > f3.gpu["sharding_buffers"]


def test_invalid_combinations_are_named():
    assert "DeepSpeed" in Setting("bf16", "ddp", 0, "optimizer").invalid_reason()
    assert "CPUOffloadPolicy" in Setting("bf16", "fsdp", 3, "optimizer").invalid_reason()
    assert "ZeRO-3" in Setting("bf16", "deepspeed", 2, "optimizer+params").invalid_reason()
    assert predict("tiny-glm4", Setting("bf16", "ddp", 0, "optimizer", world_size=2)).fits is False


def test_matrix_cheapest_fits_and_prefers_no_offload():
    m = plan_matrix("autoglm-phone-9b", micro_batch=1, seq_len=1024, ckpt_choices=(True,))
    best = m.cheapest()
    assert best is not None and best.fits and best.setting.lora
    assert best.setting.offload == "none"
    assert m.cheapest(lora=False) is None  # full fine-tuning of 10.3 B does not fit 2x24 GB + 64 GB host
    big_host = plan_matrix(
        "autoglm-phone-9b",
        DeviceSet.parse("2x24564MiB", "256GiB"),
        1,
        1024,
        lora_choices=(False,),
        ckpt_choices=(True,),
        precisions=("bf16",),
    )
    full = big_host.cheapest(lora=False)
    assert full is not None and full.setting.offload != "none" and full.setting.stage == 3
    json.dumps(m.to_dict())


def test_device_parsing_errors_name_the_field():
    d = DeviceSet.parse("2x24GiB", "64GiB")
    assert d.count == 2 and d.bytes_per_device == 24 * GiB
    with pytest.raises(ConfigError, match="--devices"):
        DeviceSet.parse("2xlots")
    with pytest.raises(ConfigError, match="--host-ram"):
        DeviceSet.parse("1x16GB", "plenty")
    with pytest.raises(ConfigError, match="--model"):
        predict("no-such-model", Setting())


def test_predict_for_run_to_dict_and_compare():
    cfg = RunConfig.model_validate(
        {
            "model": {"source": "tiny-glm4"},
            "precision": {"mode": "bf16"},
            "data": {"train": "unused.jsonl", "eval": None},
        }
    )
    plan = predict_for_run(cfg, resolve_precision(cfg, torch.device("cpu")))
    d = json.loads(json.dumps(plan.to_dict()))
    assert set(d["model_state"]) >= {"weights", "gradients", "optimizer_state", "master_weights"}
    measured = {**plan.comparable(), "weights": plan.state.weights + 10}
    rows = {r.category: r for r in compare(plan, measured)}
    assert rows["weights"].error == -10 and rows["gradients"].error == 0 and "activations" in rows


def test_cli_plan_json_and_fact_check(capsys):
    assert (
        main(
            [
                "plan",
                "--model",
                "tiny-glm4",
                "--json",
                "--precision",
                "bf16",
                "--strategy",
                "ds-zero3",
                "--seq-len",
                "64",
                "--devices",
                "2x4GiB",
                "--host-ram",
                "8GiB",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] and out["cheapest"]["overall"]["fits"]
    assert main(["plan", "--devices", "lots"]) == 2
    assert main(["fact-check", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    verdicts = {r["id"]: r["verdict"] for r in rows}
    assert len(verdicts) == 15
    assert verdicts["gguf-8gb"].startswith("plausible at a shorter context")
    assert all(
        verdicts[k] == "impossible once screenshots are counted" for k in ("000-zero3-images", "002-batch16-images")
    )
    assert verdicts["002-two-4090"].startswith("wrong for one request")
    assert all(verdicts[k] == "impossible" for k in ("003-fp32", "003-fp16", "003-lora-fp16"))
    assert verdicts["000-zero3"].startswith("impossible with its config")
    int8 = next(r for r in rows if r["id"] == "003-lora-int8")  # judged on the planner's QLoRA rows
    assert int8["verdict"] == "impossible (even an nf4 base exceeds it)" and int8["lower_bound_gib"] > 10
    # each claim cites its document by title (what a reader can find), never by an internal name
    from workbench.plan.factcheck import DOCUMENTS

    assert all(any(r["source"].startswith(d.short) for d in DOCUMENTS.values()) for r in rows), [
        r["source"] for r in rows
    ]
    assert not any("seed" in r["source"] for r in rows)
    assert main(["fact-check"]) == 0
    table = capsys.readouterr().out
    assert all(d.title in table and d.title_en in table for d in DOCUMENTS.values())
    from tests.conftest import REPO

    assert table.strip() in (REPO / "docs" / "memory_planner.md").read_text(encoding="utf-8"), (
        "docs/memory_planner.md's fact-check table is not what `workbench fact-check` prints: paste its output there"
    )


def test_cli_plans_quantized_bases_beside_the_16_bit_one(capsys):
    assert (
        main(
            [
                "plan",
                "--model",
                "tiny-glm4",
                "--json",
                "--precision",
                "bf16",
                "--strategy",
                "none",
                "--lora",
                "--grad-ckpt",
                "on",
                "--seq-len",
                "64",
                "--devices",
                "1x4GiB",
                "--quantization-base",
                "all",
            ]
        )
        == 0
    )
    rows = {r["label"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert set(rows) == {"bf16/single/LoRA/ckpt", "bf16/single/QLoRA-nf4/ckpt", "bf16/single/QLoRA-int8/ckpt"}
    weights = {label: r["model_state"]["weights"] for label, r in rows.items()}
    assert (
        weights["bf16/single/QLoRA-nf4/ckpt"]
        < weights["bf16/single/QLoRA-int8/ckpt"]
        < weights["bf16/single/LoRA/ckpt"]
    )
    assert (
        main(
            [
                "plan",
                "--model",
                "tiny-glm4",
                "--full",
                "--quantization-base",
                "nf4",
                "--json",
                "--strategy",
                "none",
                "--devices",
                "1x4GiB",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["rows"] == []  # a full fine-tune over a quantized base is no option
    assert main(["plan", "--quantization-base", "fp4"]) == 2


def test_strategy_none_is_a_world_of_one_in_every_plan(capsys):
    """One rule (``workbench.config.world_size_for``) for the matrix, the CLI, the panel and the validation."""
    from workbench.config import load_config
    from workbench.plan.planner import all_settings
    from workbench.ui.plan_panel import plan_for

    two_gpus = DeviceSet.parse("2x24GiB", "64GiB")
    settings = all_settings(two_gpus, 1, 64, precisions=("bf16",))
    assert {s.world_size for s in settings if s.strategy == "none"} == {1}
    assert {s.world_size for s in settings if s.strategy != "none"} == {2}
    assert "one process" in Setting("bf16", "none", 0, "none", world_size=2).invalid_reason()
    assert (
        main(
            [
                "plan",
                "--model",
                "tiny-glm4",
                "--json",
                "--precision",
                "bf16",
                "--strategy",
                "none",
                "--seq-len",
                "64",
                "--devices",
                "2x4GiB",
                "--host-ram",
                "8GiB",
            ]
        )
        == 0
    )
    assert {r["world_size"] for r in json.loads(capsys.readouterr().out)["rows"]} == {1}
    plan = plan_for(load_config(None, {"model.source": "tiny-glm4"}), two_gpus, strategy="none", world_size=2)
    assert plan.invalid is None and plan.setting.world_size == 1
    with pytest.raises(ConfigError, match="none runs one process"):
        load_config(None, {"sharding.nproc_per_node": 2})
