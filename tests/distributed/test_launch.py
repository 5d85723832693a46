"""The launcher's handle (stop) and the CLI's --nproc for distributed runs."""

from __future__ import annotations

import time

import pytest

from tests.conftest import SAMPLES

from .conftest import WORLD, events_of, make_config


def test_stop_ends_every_rank_cleanly_after_the_same_step(tmp_path):
    from workbench.training import launch

    handle = launch(
        make_config(
            tmp_path,
            **{
                "sharding.strategy": "ddp",
                "sharding.nproc_per_node": WORLD,
                "schedule.max_steps": 10_000,
                "output.run_name": "stopped",
            },
        )
    )
    deadline = time.monotonic() + 180
    while len(events_of(handle.run_dir, "step")) < 2:
        assert handle.is_running() and time.monotonic() < deadline, (handle.run_dir / "worker.log").read_text()[-3000:]
        time.sleep(0.2)
    assert handle.stop(120) == "stopped"
    finished = events_of(handle.run_dir, "run_finished")
    assert len(finished) == 1 and finished[0].stopped and finished[0].rank == 0
    assert events_of(handle.run_dir, "checkpoint")[0].step == finished[0].step
    assert not events_of(handle.run_dir, "run_failed")


def test_cli_train_nproc_runs_ddp(tmp_path, capsys):
    from workbench.cli.main import main

    code = main(
        [
            "train",
            "--nproc",
            str(WORLD),
            "--model.source",
            "tiny-glm4",
            "--device",
            "cpu",
            "--data.train",
            str(SAMPLES / "identity" / "train.jsonl"),
            "--data.eval",
            "null",
            "--data.max_length",
            "64",
            "--schedule.max_steps",
            "2",
            "--schedule.micro_batch_size",
            "2",
            "--precision.mode",
            "fp32",
            "--output.runs_dir",
            str(tmp_path),
            "--output.run_name",
            "cli",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "run finished" in out
    started = events_of(tmp_path / "cli", "run_started")[0]
    assert started.config["sharding"]["strategy"] == "ddp" and started.config["sharding"]["nproc_per_node"] == WORLD
    assert {e.rank for e in events_of(tmp_path / "cli", "memory")} == {0, 1}


@pytest.mark.slow
def test_two_nodes_on_one_host(tmp_path):
    """nnodes=2 x nproc_per_node=1: two launches (one per "node") rendezvous at node 0's address and port."""
    from workbench.distributed.context import free_port
    from workbench.training import launch

    common = {
        "sharding.strategy": "fsdp",
        "sharding.nproc_per_node": 1,
        "sharding.nnodes": 2,
        "sharding.master_addr": "127.0.0.1",
        "sharding.master_port": free_port(),
        "schedule.max_steps": 3,
        "output.run_name": "two-nodes",
    }
    node0 = launch(make_config(tmp_path, **common, **{"sharding.node_rank": 0}))
    node1 = launch(make_config(tmp_path, **common, **{"sharding.node_rank": 1}), run_dir=node0.run_dir)
    assert node1.wait(300) in ("finished",) and node0.wait(300) == "finished", (
        node0.run_dir / "worker.log"
    ).read_text()[-3000:]
    assert (node0.run_dir / "config-node1.json").is_file() and (node0.run_dir / "worker-node1.log").is_file()
    assert {e.rank for e in events_of(node0.run_dir, "memory")} == {0, 1}
    assert len(events_of(node0.run_dir, "step")) == 3 and len(events_of(node0.run_dir, "run_finished")) == 1
    assert events_of(node0.run_dir, "run_started")[0].config["sharding"]["nnodes"] == 2


def test_a_config_of_several_ranks_trained_in_this_process_says_it_runs_as_a_world_of_one(tmp_path, recwarn):
    """train(cfg) outside torchrun runs a distributed strategy as a world of one (the same code path): with
    nproc_per_node 2 that is half the rows a step, so it warns and names what starts the ranks; with 1 it is silent."""
    from workbench.training import train

    common = {
        "sharding.strategy": "ddp",
        "schedule.max_steps": 1,
        "schedule.grad_accum_steps": 1,
        "schedule.warmup_steps": 0,
    }
    train(make_config(tmp_path, **common, **{"output.run_name": "one"}))
    assert not [w for w in recwarn if "world of one" in str(w.message)]
    for name in ("two", "again"):  # the second run in the same process too (the world of one is kept)
        with pytest.warns(UserWarning, match=r"2 processes .* world of one, on 1/2 of the rows a step\. launch\(cfg\)"):
            train(make_config(tmp_path, **common, **{"sharding.nproc_per_node": WORLD, "output.run_name": name}))
