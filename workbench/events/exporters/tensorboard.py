"""TensorBoard scalars of a run (``tensorboard --logdir runs/NAME/tensorboard``), live with ``--follow``.

Tags (x axis: the training step; wall time: the event's time):
  train/loss, train/lr, train/grad_norm (finite values only: a skipped fp16 step has none), train/tokens_per_s,
  eval/loss, precision/loss_scale, precision/overflow_count (overflows so far, at every step),
  memory/host_rss_mib, memory/{params,grads,optimizer,master_weights}_mib, memory/<device>/{allocated,reserved,peak}_mib.
Step, eval and overflow events count from rank 0 only (every rank logs them alike); memory is per rank, under
memory/rank<N>/... for ranks other than 0.
"""

from __future__ import annotations

from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from ..log import finite_number

MiB = 2**20
FILE_SUFFIX = ".workbench"  # marks the files this exporter writes, so a re-export replaces them
STEP_SCALARS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "tokens_per_s": "train/tokens_per_s",
    "loss_scale": "precision/loss_scale",
}
MODEL_STATE_MIB = {
    "params_bytes": "params_mib",
    "grads_bytes": "grads_mib",
    "optimizer_bytes": "optimizer_mib",
    "master_weights_bytes": "master_weights_mib",
}
DEVICE_MIB = {"allocated": "allocated_mib", "reserved": "reserved_mib", "peak": "peak_mib"}


def scalars_of(event: dict, overflows_so_far: int) -> list[tuple[str, float]]:
    """(tag, value) pairs of one event; ``overflows_so_far`` counts the rank-0 overflows up to it."""
    kind, rank = event.get("type"), event.get("rank") or 0
    out: list[tuple[str, float | None]] = []
    if kind == "step" and rank == 0:
        out = [(tag, finite_number(event.get(field))) for field, tag in STEP_SCALARS.items()]
        out.append(("precision/overflow_count", float(overflows_so_far)))
    elif kind == "eval" and rank == 0:
        out = [("eval/loss", finite_number(event.get("loss")))]
    elif kind == "memory":
        prefix = "memory/" if rank == 0 else f"memory/rank{rank}/"
        rss = finite_number(event.get("host_rss"))
        out = [(f"{prefix}host_rss_mib", rss / MiB if rss is not None else None)]
        for field, name in MODEL_STATE_MIB.items():
            v = finite_number(event.get(field))
            out.append((f"{prefix}{name}", v / MiB if v is not None else None))
        for dev in event.get("devices") or []:
            for field, name in DEVICE_MIB.items():
                v = finite_number(dev.get(field))
                out.append((f"{prefix}{dev.get('device', 'device')}/{name}", v / MiB if v is not None else None))
    return [(tag, v) for tag, v in out if v is not None]


class TensorBoardExporter:
    description = "TensorBoard scalars: loss, lr, grad norm, loss scale, overflow count, memory"
    default_dir = "tensorboard"

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        for old in self.out_dir.glob(f"events.out.tfevents.*{FILE_SUFFIX}"):
            old.unlink()  # a second export of the same run would otherwise draw every curve twice
        self.writer = EventFileWriter(str(self.out_dir), filename_suffix=FILE_SUFFIX)
        self.overflows = 0

    def write(self, events: list[dict]) -> None:
        for e in events:
            if e.get("type") == "overflow" and not e.get("rank"):
                self.overflows += 1
            values = scalars_of(e, self.overflows)
            if not values or not isinstance(e.get("step"), int):
                continue
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
            self.writer.add_event(
                event_pb2.Event(wall_time=float(e.get("time") or 0.0), step=e["step"], summary=summary)
            )

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
