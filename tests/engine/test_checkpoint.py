"""Loading a checkpoint at another world size: decided by the strategy's ``can_reshard``, not by its name."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from workbench.distributed.context import DistContext
from workbench.distributed.strategies import STRATEGIES
from workbench.engine.checkpoint import load_checkpoint


class Loaded(Exception):
    """Raised by the probe strategy's load_state: the checkpoint got past the world-size check."""


def _probe(name: str, can_reshard: bool):
    def load_state(directory):
        raise Loaded(directory)

    return SimpleNamespace(name=name, can_reshard=can_reshard, ctx=DistContext(), load_state=load_state)


def _written_by(tmp_path, strategy: str, world_size: int):
    path = tmp_path / strategy / "step-0000002"
    path.mkdir(parents=True)
    (path / "sharding.json").write_text(json.dumps({"strategy": strategy, "world_size": world_size}))
    return path


def test_only_strategies_that_reshard_load_a_checkpoint_of_another_world_size(tmp_path):
    assert {name for name, kind in STRATEGIES.items() if kind.can_reshard} == {"fsdp"}
    for name, kind in [*STRATEGIES.items(), ("plug-in", SimpleNamespace(can_reshard=True))]:
        path = _written_by(tmp_path, name, world_size=2)  # this process is a world of one
        if kind.can_reshard:
            with pytest.raises(Loaded):
                load_checkpoint(path, _probe(name, True), scheduler=None)
        else:
            with pytest.raises(
                ValueError,
                match=f"written by 2 ranks, this run has 1: {name} checkpoints do not "
                r"reshard to another world size \(only fsdp checkpoints do\)",
            ):
                load_checkpoint(path, _probe(name, False), scheduler=None)
    # the same world size loads whatever the strategy
    with pytest.raises(Loaded):
        load_checkpoint(_written_by(tmp_path / "same", "ddp", world_size=1), _probe("ddp", False), scheduler=None)
