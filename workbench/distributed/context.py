"""Who this process is in a run (rank, world size, device) and the few collectives the engine needs.

A one-process run gets a context whose collectives are identities, so the engine's loop reads the
same for every strategy.
"""

from __future__ import annotations

import contextlib
import os
import socket
import warnings
from dataclasses import dataclass
from datetime import timedelta

import torch

# Set by the workbench launcher so ranks leave run_failed to it (it knows which rank failed first).
TORCHRUN_LAUNCHER_ENV = "WORKBENCH_TORCHRUN_LAUNCHER"
# Set by init_distributed when it made this process a world of one itself (no torchrun); see shutdown.
WORLD_OF_ONE_ENV = "WORKBENCH_WORLD_OF_ONE"


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None  # None: no process group (strategy none)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.backend is not None

    @property
    def world_of_one(self) -> bool:
        """A world of one (strategy none, or a distributed strategy started without torchrun): collectives are
        identities."""
        return not self.active or self.world_size == 1

    @property
    def under_torchrun_launcher(self) -> bool:
        return os.environ.get(TORCHRUN_LAUNCHER_ENV) == "1"

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over ranks, in float64 (token counts stay exact far beyond 2**24)."""
        if self.world_of_one:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return t.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any: keeps decisions (stop, skip) collective."""
        if self.world_of_one:
            return flag
        t = torch.tensor([1 if flag else 0], dtype=torch.int64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return bool(t.item())

    def broadcast_object(self, obj):
        if self.world_of_one:
            return obj
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]


def rank_device(device: torch.device, ctx: DistContext) -> torch.device:
    """Each rank owns the GPU of its local rank; CPU ranks share the host."""
    if device.type == "cuda" and ctx.active:
        torch.cuda.set_device(ctx.local_rank)
        return torch.device("cuda", ctx.local_rank)
    return device


def init_distributed(sharding, device_type: str) -> DistContext:
    """Join the process group torchrun set up (RANK, WORLD_SIZE, MASTER_ADDR/PORT in the environment).

    Called without torchrun (``train(cfg)`` in a notebook) a distributed strategy runs as a world of
    one on a free local port, which exercises the same code path.
    """
    if not sharding.distributed:
        return DistContext()
    backend = sharding.backend if sharding.backend != "auto" else ("nccl" if device_type == "cuda" else "gloo")
    if sharding.world_size > 1 and ("RANK" not in os.environ or os.environ.get(WORLD_OF_ONE_ENV) == "1"):
        warnings.warn(
            f"sharding asks for {sharding.world_size} processes (nproc_per_node x nnodes), but this process "
            "is not one of torchrun's: it trains as a world of one, on 1/"
            f"{sharding.world_size} of the rows a step. launch(cfg) or `workbench train` starts the ranks.",
            stacklevel=2,
        )
    if "RANK" not in os.environ:
        os.environ.update(
            RANK="0",
            LOCAL_RANK="0",
            WORLD_SIZE="1",
            LOCAL_WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(free_port()),
            **{WORLD_OF_ONE_ENV: "1"},
        )
    ctx = DistContext(
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        backend=backend,
    )
    if not torch.distributed.is_initialized():
        # A dead peer surfaces as a connection error long before this; the timeout only bounds true hangs.
        torch.distributed.init_process_group(backend, timeout=timedelta(minutes=10))
    return ctx


def shutdown(ctx: DistContext) -> None:
    """Leave the process group torchrun made. A world of one made here stays for the next run of this
    process (a notebook kernel): DeepSpeed caches the group, and a new one would orphan its cache."""
    if ctx.active and torch.distributed.is_initialized() and os.environ.get(WORLD_OF_ONE_ENV) != "1":
        torch.distributed.destroy_process_group()
