"""DPO under DDP: two gloo ranks each take their pairs of the global micro-batch, compute their share of the start
model's reference log-probabilities (summed, so both hold all), and train to the one-process run's losses, margins and
adapter; rank 0 writes the dpo_rewards events over both ranks' pairs."""

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import SAMPLES
from workbench import train

from .conftest import PER_RANK, WORLD, events_of, launch_and_wait, make_config, step_losses

DPO = {
    "training.method": "dpo",
    "data.train": str(SAMPLES / "identity" / "pairs.jsonl"),
    "schedule.max_steps": 4,
    "schedule.learning_rate": 3e-3,
}


@pytest.mark.slow  # ~40 s: two worker processes and the one-process reference
def test_dpo_under_ddp_trains_as_one_process(tmp_path):
    single = train(
        make_config(tmp_path, **DPO, **{"schedule.micro_batch_size": PER_RANK * WORLD, "output.run_name": "single"})
    ).run_dir
    ddp = launch_and_wait(
        make_config(
            tmp_path, **DPO, **{"sharding.strategy": "ddp", "sharding.nproc_per_node": WORLD, "output.run_name": "ddp"}
        )
    )
    torch.testing.assert_close(torch.tensor(step_losses(ddp)), torch.tensor(step_losses(single)), rtol=1e-4, atol=0)
    one, two = events_of(single, "dpo_rewards"), events_of(ddp, "dpo_rewards")
    assert [e.step for e in two] == [1, 2, 3, 4] and {e.rank for e in two} == {0}
    # each step's window: 2 micro-batches x 2 pairs x 2 ranks, the rewards over all of them
    assert {e.pairs for e in two} == {2 * PER_RANK * WORLD}
    torch.testing.assert_close(
        torch.tensor([e.margin for e in two]), torch.tensor([e.margin for e in one]), rtol=1e-3, atol=1e-4
    )
    assert two[0].margin == pytest.approx(0, abs=1e-5) and two[-1].margin > 0.5  # frozen start, then it learned
    a, b = (load_file(str(run / "adapter" / "adapter_model.safetensors")) for run in (single, ddp))
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=1e-5, rtol=0)
    assert {e.rank for e in events_of(ddp, "memory")} == {0, 1} and events_of(ddp, "census")
