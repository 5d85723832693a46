"""Sharding settings, DeepSpeed JSON import/export, the torchrun command and the shared event log
(no training processes: fast)."""

from __future__ import annotations

import json
import multiprocessing
import warnings

import pytest

from tests.conftest import SAMPLES
from workbench.config import ConfigError, load_config

from .conftest import base_overrides

SEED_DS = SAMPLES / "deepspeed" / "seed000_ds_config.json"


def problems_of(tmp_path, **extra) -> dict:
    with pytest.raises(ConfigError) as err:
        load_config(None, base_overrides(tmp_path, **extra))
    return dict(err.value.problems)


def test_defaults_are_one_process(tmp_path):
    cfg = load_config(None, base_overrides(tmp_path))
    assert cfg.sharding.strategy == "none" and cfg.sharding.world_size == 1 and not cfg.sharding.distributed


@pytest.mark.parametrize(
    "extra,path,needle",
    [
        ({"sharding.nproc_per_node": 2}, "sharding.strategy", "none runs one process"),
        ({"sharding.strategy": "ddp", "sharding.offload": "optimizer"}, "sharding.offload", "shards nothing"),
        ({"sharding.offload": "optimizer+params"}, "sharding.offload", "shards nothing"),
        ({"sharding.strategy": "fsdp", "sharding.offload": "optimizer"}, "sharding.offload", "together"),
        (
            {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 2, "sharding.offload": "optimizer+params"},
            "sharding.offload",
            "only under ZeRO-3",
        ),
        ({"sharding.strategy": "deepspeed", "precision.mode": "pure-bf16"}, "precision.mode", "fp32 master weights"),
        ({"sharding.strategy": "deepspeed", "precision.mode": "fp16"}, "precision.mode", "CPU accelerator has no fp16"),
        ({"sharding.strategy": "fsdp", "checkpointing.merge_adapter": True}, "checkpointing.merge_adapter", "merge"),
        ({"sharding.strategy": "ddp", "sharding.backend": "nccl"}, "sharding.backend", "nccl needs GPUs"),
        (
            {"sharding.strategy": "fsdp", "sharding.offload": "optimizer+params"},
            "sharding.offload",
            "on the CPU already",
        ),
        (
            {"sharding.strategy": "ddp", "sharding.nnodes": 2, "sharding.node_rank": 2},
            "sharding.node_rank",
            "not below",
        ),
        ({"sharding.strategy": "ddp", "sharding.nnodes": 2}, "output.run_name", "same run directory"),
    ],
)
def test_impossible_combinations_are_rejected_with_the_reason(tmp_path, extra, path, needle):
    problems = problems_of(tmp_path, **extra)
    assert needle in problems.get(path, ""), problems


def test_more_processes_than_gpus_is_rejected(tmp_path, monkeypatch):
    import workbench.config.schema as schema

    monkeypatch.setattr(schema, "_visible_gpus", lambda: 2)
    problems = problems_of(tmp_path, **{"device": "auto", "sharding.strategy": "ddp", "sharding.nproc_per_node": 4})
    assert "4 processes but 2 GPU(s)" in problems["sharding.nproc_per_node"]


def test_deepspeed_missing_is_rejected(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real(name, *a))
    assert "not installed" in problems_of(tmp_path, **{"sharding.strategy": "deepspeed"})["sharding.strategy"]


def test_fp16_fsdp_without_sharded_scaler_is_rejected(tmp_path, monkeypatch):
    import workbench.config.schema as schema

    monkeypatch.setattr(schema, "_sharded_grad_scaler_available", lambda: False)
    problems = problems_of(tmp_path, **{"sharding.strategy": "fsdp", "precision.mode": "fp16"})
    assert "ShardedGradScaler" in problems["precision.mode"]


def test_all_problems_reported_at_once(tmp_path):
    problems = problems_of(
        tmp_path,
        **{
            "sharding.strategy": "deepspeed",
            "precision.mode": "pure-bf16",
            "sharding.deepspeed_stage": 1,
            "sharding.offload": "optimizer+params",
        },
    )
    assert {"precision.mode", "sharding.offload"} <= set(problems)


# ---- DeepSpeed JSON ---------------------------------------------------------------------------------


def test_seed_deepspeed_config_imports_with_the_two_warnings(tmp_path):
    from workbench.config.deepspeed_import import DeepSpeedConfigWarning, import_deepspeed_config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = import_deepspeed_config(SEED_DS, world_size=2)
    keys = [k for k, _ in result.warnings]
    assert keys == ["optimizer.params.fp16_optimizer_state", "fp16.loss_scale"]
    assert len([w for w in caught if issubclass(w.category, DeepSpeedConfigWarning)]) == 2
    unknown, fixed = (m for _, m in result.warnings)
    assert "not an argument" in unknown and "unexpected-keyword TypeError" in unknown
    assert "fixed (static) loss scale of 128" in fixed and "dynamic loss scaling off" in fixed
    assert "initial_scale_power=7" in fixed and "loss_scale_window=1000" in fixed and "set loss_scale to 0" in fixed
    o = result.overrides
    assert o["sharding.strategy"] == "deepspeed" and o["sharding.deepspeed_stage"] == 3
    assert o["sharding.offload"] == "optimizer" and o["sharding.nproc_per_node"] == 2
    assert o["schedule.micro_batch_size"] == 4 and o["schedule.grad_accum_steps"] == 8  # 64 = 4 x 2 GPUs x 8
    assert o["precision.mode"] == "fp16" and o["precision.init_scale"] == 128.0 and o["precision.max_grad_norm"] == 1.0
    assert o["schedule.learning_rate"] == 5e-5 and o["schedule.weight_decay"] == 0.01


def test_seed_import_validates_as_a_runconfig_for_gpus(tmp_path, monkeypatch):
    import workbench.config.schema as schema
    from workbench.config.deepspeed_import import import_deepspeed_config

    monkeypatch.setattr(schema, "_visible_gpus", lambda: 2)  # the article's 2x RTX 4090
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = import_deepspeed_config(SEED_DS, world_size=2)
    base = {"data": {"train": str(SAMPLES / "identity" / "train.jsonl"), "eval": None}, "device": "cuda"}
    cfg = result.config(base)
    assert cfg.sharding.world_size == 2 and cfg.precision.growth_interval >= 10**9


def gpu_policy(cfg):
    from workbench.hardware import Hardware
    from workbench.precision import resolve_policy

    return resolve_policy(cfg.precision, Hardware.gpu(), cfg.lora.enabled, cfg.model.dtype)


def test_export_round_trip(tmp_path):
    from workbench.config.deepspeed_import import import_deepspeed_config
    from workbench.distributed.ds_config import to_deepspeed_config

    cfg = load_config(
        None,
        base_overrides(
            tmp_path,
            **{
                "sharding.strategy": "deepspeed",
                "sharding.deepspeed_stage": 2,
                "sharding.nproc_per_node": 2,
                "precision.mode": "bf16",
                "precision.max_grad_norm": 0.5,
            },
        ),
    )
    ds = to_deepspeed_config(cfg, gpu_policy(cfg))
    assert ds["train_batch_size"] == 2 * 2 * 2 and ds["zero_optimization"] == {"stage": 2}
    assert ds["bf16"] == {"enabled": True} and ds["gradient_clipping"] == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # our own export never warns on import
        back = import_deepspeed_config(json.loads(json.dumps(ds)))
    assert not back.warnings
    for key in (
        "schedule.micro_batch_size",
        "schedule.grad_accum_steps",
        "schedule.learning_rate",
        "precision.mode",
        "precision.max_grad_norm",
        "sharding.deepspeed_stage",
        "sharding.nproc_per_node",
    ):
        section, field = key.split(".")
        assert back.overrides[key] == getattr(getattr(cfg, section), field), key


def test_the_deepspeed_config_writes_the_optimizer_the_engine_builds(tmp_path):
    import torch

    from workbench.distributed.ds_config import to_deepspeed_config
    from workbench.engine.step import build_optimizer

    cfg = load_config(None, base_overrides(tmp_path, **{"schedule.learning_rate": 2e-4, "schedule.weight_decay": 0.01}))
    group = build_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg.schedule).param_groups[0]
    ds = to_deepspeed_config(cfg, gpu_policy(cfg))["optimizer"]
    assert ds["type"] == "AdamW"
    assert ds["params"] == {
        "lr": group["lr"],
        "weight_decay": group["weight_decay"],
        "betas": list(group["betas"]),
        "eps": group["eps"],
    }


def test_export_fp16_is_dynamic_and_backs_off_every_overflow(tmp_path):
    from workbench.distributed.ds_config import to_deepspeed_config

    cfg = load_config(None, base_overrides(tmp_path, **{"precision.mode": "fp16", "precision.init_scale": 1024.0}))
    fp16 = to_deepspeed_config(cfg, gpu_policy(cfg), world_size=2)["fp16"]
    assert fp16["loss_scale"] == 0 and fp16["initial_scale_power"] == 10 and fp16["hysteresis"] == 1


# ---- launcher and event log -------------------------------------------------------------------------


def test_torchrun_arguments(tmp_path):
    from workbench.distributed.launcher import torchrun_args

    one = load_config(None, base_overrides(tmp_path, **{"sharding.strategy": "ddp", "sharding.nproc_per_node": 2}))
    args = torchrun_args(one.sharding, "workbench.training", "RUN")
    assert "--standalone" in args and args[-3:] == ["-m", "workbench.training", "RUN"]
    assert args[args.index("--nproc_per_node") + 1] == "2"
    multi = load_config(
        None,
        base_overrides(
            tmp_path,
            **{
                "sharding.strategy": "fsdp",
                "sharding.nproc_per_node": 2,
                "sharding.nnodes": 2,
                "sharding.node_rank": 1,
                "sharding.master_addr": "10.0.0.1",
                "output.run_name": "multi",
            },
        ),
    )
    args = torchrun_args(multi.sharding, "workbench.training", "RUN")
    assert "--standalone" not in args
    for flag, value in (
        ("--nnodes", "2"),
        ("--node_rank", "1"),
        ("--master_addr", "10.0.0.1"),
        ("--master_port", "29500"),
    ):
        assert args[args.index(flag) + 1] == value


def _hammer(path, rank, n):
    from workbench.events import Census, EventWriter

    w = EventWriter(path, rank=rank)
    for i in range(n):  # 20 KiB lines: far above the 4 KiB pipe limit and Python's 8 KiB buffer
        w.emit(Census(step=i, rows=[{"group": "x" * 20_000, "rank": rank}], totals={}))
    w.close()


def test_ranks_append_whole_lines_to_one_log(tmp_path):
    from workbench.events import read_events

    path = tmp_path / "events.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(path, r, 300)) for r in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    events, _ = read_events(path, typed=False)  # raises on any interleaved line
    assert len(events) == 900
    for e in events:
        assert e["rank"] == e["rows"][0]["rank"]


def test_deepspeed_verdict_maps_to_the_same_step_outcome():
    """DeepSpeed's fp16 figures (no fp16 on its CPU accelerator, so a stand-in engine) become a StepOutcome."""
    from types import SimpleNamespace

    from workbench.distributed.strategies import DeepSpeedStrategy

    class Engine:
        def __init__(self, applied, norm):
            self.applied, self.norm = applied, norm

        def fp16_enabled(self):
            return True

        def step(self):
            if not self.applied:
                opt.loss_scale /= 2

        def was_step_applied(self):
            return self.applied

        def get_global_grad_norm(self):
            return self.norm

    opt = SimpleNamespace(loss_scale=1024.0)
    s = DeepSpeedStrategy.__new__(DeepSpeedStrategy)
    s.ds_optimizer = opt
    s.model = Engine(applied=False, norm=None)
    skipped = s.step(1.0)
    assert skipped.skipped and skipped.grad_norm == float("inf")
    assert (skipped.scale_before, skipped.scale_after) == (1024.0, 512.0)
    s.model = Engine(applied=True, norm=0.75)
    ok = s.step(1.0)
    assert not ok.skipped and ok.grad_norm == 0.75 and ok.scale_before == ok.scale_after == 512.0


def test_export_derives_a_null_learning_rate_from_the_model_as_a_run_does(tmp_path):
    from workbench.distributed.ds_config import to_deepspeed_config

    cfg = load_config(None, base_overrides(tmp_path, **{"schedule.learning_rate": None}))
    assert to_deepspeed_config(cfg, gpu_policy(cfg))["optimizer"]["params"]["lr"] == 1e-3  # tiny-glm4 + LoRA
