"""A quantized base (quantization.base) under the sharding strategies that can hold one: FSDP2 with nf4 and DeepSpeed
ZeRO-3 with nf4 or int8 train to the one-process run's losses (2 gloo ranks, fp32, the same tolerances as
test_strategies.py), and every rank holds the weights bytes the planner predicts for it. FSDP2 with int8 is refused
before anything starts (it fails in bitsandbytes' int8 layer: test_refusals in tests/config)."""

from __future__ import annotations

import pytest
import torch

from .conftest import PER_RANK, WORLD, events_of, launch_and_wait, make_config, step_losses

LOSS_RTOL = 1e-4
SHARDED = {
    "fsdp-zero3-nf4": {"sharding.strategy": "fsdp", "sharding.fsdp_stage": "zero3", "quantization.base": "nf4"},
    "deepspeed-3-nf4": {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 3, "quantization.base": "nf4"},
    "deepspeed-3-int8": {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 3, "quantization.base": "int8"},
}


class _Runs(dict):
    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, name):
        from workbench import train

        if name.startswith("single-"):
            run = train(
                make_config(
                    self.root,
                    **{
                        "schedule.micro_batch_size": PER_RANK * WORLD,
                        "quantization.base": name.split("-")[1],
                        "output.run_name": name,
                    },
                )
            ).run_dir
        else:
            run = launch_and_wait(
                make_config(self.root, **SHARDED[name], **{"sharding.nproc_per_node": WORLD, "output.run_name": name})
            )
        self[name] = run
        return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _Runs(tmp_path_factory.mktemp("quantized-strategies"))


@pytest.mark.slow  # three two-rank launches (~20 s each on 2 cores): CI's slow step
@pytest.mark.parametrize("name", list(SHARDED))
def test_sharded_quantized_base_trains_like_one_process(runs, name):
    kind = SHARDED[name]["quantization.base"]
    reference, got = step_losses(runs[f"single-{kind}"]), step_losses(runs[name])
    assert len(got) == 10 and len(reference) == 10
    torch.testing.assert_close(torch.tensor(got), torch.tensor(reference), rtol=LOSS_RTOL, atol=0)
    assert reference[-1] < reference[0] - 0.1, reference  # it learned: the comparison is not vacuous
    census = events_of(runs[name], "census")[0]
    assert {r["dtype"] for r in census.rows if r["quantized"] == "bitsandbytes"} == {kind}
    plan = events_of(runs[name], "plan")[0].plan
    whole = events_of(runs[f"single-{kind}"], "memory")[-1].params_bytes
    for rank in range(WORLD):
        measured = events_of(runs[name], "memory", rank=rank)[-1].params_bytes
        assert measured == plan["model_state"]["weights"], (rank, measured, plan["model_state"])
        # FSDP2 keeps a shard of every parameter, packed codes included; ZeRO-3 keeps this tiny model's tensors whole
        # (each is under its persistence threshold of 1e5 elements)
        assert measured < whole if name.startswith("fsdp") else measured == whole, (measured, whole)
