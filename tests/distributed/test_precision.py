"""The precision policy is resolved once and every strategy computes in its dtypes: for each strategy and
each requested mode, the dtype of the forward matmuls (and, for DeepSpeed, the engine's own config)
equals the policy's. Each strategy runs as a world of one, through the same code path as torchrun ranks."""

from __future__ import annotations

import pytest
import torch

from workbench.config import ConfigError
from workbench.engine import run_engine
from workbench.engine.observers import Observer

MODES = ["auto", "fp32", "fp16", "bf16", "pure-bf16"]
LINEAR = torch.nn.functional.linear
STRATEGIES = ["none", "ddp", "fsdp", "deepspeed"]
# DeepSpeed keeps fp32 master weights (no pure-bf16), and its CPU accelerator has no fp16.
REFUSED = {("deepspeed", "pure-bf16"), ("deepspeed", "fp16", "cpu")}


class MatmulDtypes(Observer):
    """Records the output dtype of every nn.Linear during the first training step, then stops the run."""

    def setup(self, run):
        self.policy = run.precision
        self.seen: set = set()
        self.deepspeed = None
        if hasattr(run.model, "fp16_enabled"):  # a DeepSpeed engine: what it was configured to run in
            self.deepspeed = {"fp16": run.model.fp16_enabled(), "bf16": run.model.bfloat16_enabled()}
        # The output head of a labels/chunked loss head (forward.head) returns the fp32 loss sum where logits were:
        # what it computes in is seen through its inputs (the hidden states) instead of its output.
        inner = getattr(run.model, "module", run.model)  # under a DDP / DeepSpeed wrapper
        head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
        self.handles = [
            m.register_forward_hook(lambda mod, args, out: self.seen.add(out.dtype))
            for m in run.model.modules()
            if isinstance(m, torch.nn.Linear) and m is not head
        ]
        if head is not None:
            self.handles.append(head.register_forward_pre_hook(lambda mod, args: self.seen.add(args[0].dtype)))

    def after_step(self, run, step, outcome, loss):
        return "probed one step"

    def finish(self, run):
        for h in self.handles:
            h.remove()


def _compute_dtype(policy) -> torch.dtype:
    if policy.autocast_dtype is not None:
        return policy.autocast_dtype
    return torch.bfloat16 if policy.mode == "pure-bf16" else torch.float32


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("mode", MODES)
def test_every_strategy_computes_in_the_policys_dtype(make_cfg, strategy, mode, device):
    overrides = {
        "sharding.strategy": strategy,
        "precision.mode": mode,
        "device": device,
        "schedule.max_steps": 2,
        "schedule.micro_batch_size": 2,
        "lora.dropout": 0.0,
    }
    if (strategy, mode) in REFUSED or (strategy, mode, device) in REFUSED:
        with pytest.raises(ConfigError) as exc:  # refused up front, naming the field, rather than run in another dtype
            make_cfg(**overrides)
        assert "precision.mode" in dict(exc.value.problems)
        return
    probe = MatmulDtypes()
    cfg = make_cfg(**overrides)
    result = run_engine(cfg, observers=[probe])
    assert result.stop_reason == "probed one step"
    want = _compute_dtype(probe.policy)
    assert probe.policy.requested == mode and probe.policy.mode != "auto"
    assert probe.seen == {want}, f"{strategy}/{mode}: policy {probe.policy.mode} computes in {want}, saw {probe.seen}"
    if strategy == "deepspeed":
        # ZeRO-3's memory-efficient linear would replace F.linear for the whole process: the engine turns it off
        assert torch.nn.functional.linear is LINEAR
        assert probe.deepspeed == {
            "fp16": probe.policy.mode == "fp16",
            "bf16": probe.policy.mode in ("bf16", "pure-bf16"),
        }, probe.policy.mode


class ShardedDtypes(Observer):
    """Records each parameter's class, dtype and trainability after the strategy wrapped the model, and the
    dtype a watched module's weight has while its forward runs (unsharded: the dtype its matmul runs in)."""

    def __init__(self, watch: str):
        self.watch = watch

    def setup(self, run):
        self.params = {n: (type(p).__name__, p.dtype, p.requires_grad) for n, p in run.model.named_parameters()}
        self.compute: set = set()
        self.handles = [
            m.register_forward_hook(lambda mod, args, out: self.compute.add(mod.weight.dtype))
            for n, m in run.model.named_modules()
            if n.endswith(self.watch)
        ]

    def finish(self, run):
        for h in self.handles:
            h.remove()


@pytest.mark.parametrize(
    "mode,lora,rule,watch,want",
    [
        # full fine-tuning in pure bf16: lm_head's *trained* weights become fp32 shards and compute in fp32
        ("pure-bf16", False, {"pattern": "lm_head", "compute": "float32"}, "lm_head", (torch.float32, True)),
        # LoRA under bf16 autocast: the frozen embedding is stored as fp32 shards
        ("bf16", True, {"pattern": "embed_tokens", "storage": "float32"}, "embed_tokens", (torch.float32, False)),
    ],
)
def test_module_rules_set_the_dtype_of_fsdp_zero3_shards(make_cfg, mode, lora, rule, watch, want):
    from workbench.events import iter_events

    probe = ShardedDtypes(watch)
    result = run_engine(
        make_cfg(
            **{
                "sharding.strategy": "fsdp",
                "sharding.fsdp_stage": "zero3",
                "precision.mode": mode,
                "lora.enabled": lora,
                "precision.module_rules": [rule],
                "schedule.max_steps": 2,
            }
        ),
        observers=[probe],
    )
    ruled = {n: v for n, v in probe.params.items() if watch in n}
    assert ruled and all(v == ("DTensor", *want) for v in ruled.values()), ruled
    decoder = {
        v for n, v in probe.params.items() if n.endswith("q_proj.weight") or n.endswith("q_proj.base_layer.weight")
    }
    assert decoder == {("DTensor", torch.bfloat16, not lora)}, decoder  # the rest follows the mode
    if rule.get("compute") == "float32":
        assert probe.compute == {torch.float32}  # gathered in fp32 by its own FSDP unit, not cast down
    assert all(torch.isfinite(torch.tensor(result.losses)))
    (applied,) = [e for e in iter_events(result.run_dir / "events.jsonl") if e.type == "precision_rules"]
    assert applied.rules[0]["params_recast"] > 0
    assert (applied.rules[0]["trained_params_recast"] > 0) == want[1]
