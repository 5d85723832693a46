"""Typed, versioned run events. The engine writes them; UI, CLI and extensions only read them.

One JSON object per line with ``type``, ``v`` (schema version), ``time`` (unix seconds) and
``rank``. Readers must ignore unknown fields and unknown types (forward compatibility).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"
    time: float = field(default_factory=time.time, kw_only=True)
    rank: int = field(default=0, kw_only=True)

    def to_dict(self) -> dict:
        d = {"type": self.type, "v": SCHEMA_VERSION}
        d.update(dataclasses.asdict(self))
        return d


@dataclass(frozen=True)
class RunStarted(Event):
    type: ClassVar[str] = "run_started"
    run_dir: str
    config: dict
    hardware: dict
    versions: dict
    precision: dict  # the resolved PrecisionPolicy
    total_steps: int
    start_step: int = 0
    data: dict = field(default_factory=dict)  # example counts, truncated, skipped rows


@dataclass(frozen=True)
class Step(Event):
    type: ClassVar[str] = "step"
    step: int
    loss: float
    lr: float
    grad_norm: Optional[float]
    loss_scale: Optional[float]
    skipped: bool
    tokens: int
    tokens_per_s: float
    step_time_s: float
    eta_s: float


@dataclass(frozen=True)
class Overflow(Event):
    type: ClassVar[str] = "overflow"
    step: int
    scale_before: Optional[float]
    scale_after: Optional[float]
    nonfinite_params: list  # names of parameters whose gradients held inf/nan (capped)
    nonfinite_count: int


@dataclass(frozen=True)
class Census(Event):
    type: ClassVar[str] = "census"
    step: int
    rows: list  # [{group, dtype, trainable, count, bytes}]
    totals: dict  # {dtype: count}


@dataclass(frozen=True)
class Memory(Event):
    type: ClassVar[str] = "memory"
    step: int
    devices: list  # [{device, allocated, reserved, peak}] on GPUs
    host_rss: int
    params_bytes: int
    grads_bytes: int  # measured after backward, before the optimizer step frees them
    optimizer_bytes: int
    master_weights_bytes: int = 0  # an fp32 copy held besides the weights (DeepSpeed); 0 under torch AMP


@dataclass(frozen=True)
class PlanPrediction(Event):
    """The memory planner's prediction for this run, emitted at start (compare with ``memory``)."""

    type: ClassVar[str] = "plan"
    step: int
    plan: dict


@dataclass(frozen=True)
class Eval(Event):
    type: ClassVar[str] = "eval"
    step: int
    loss: float
    tokens: int


@dataclass(frozen=True)
class Checkpoint(Event):
    type: ClassVar[str] = "checkpoint"
    step: int
    path: str
    kind: str  # "resumable" | "adapter" | "merged"


@dataclass(frozen=True)
class RunFinished(Event):
    type: ClassVar[str] = "run_finished"
    step: int
    final_loss: Optional[float]
    adapter_path: Optional[str]
    wall_s: float
    stopped: bool = False  # ended early by a stop request or an observer (after saving a checkpoint)
    stop_reason: Optional[str] = None


@dataclass(frozen=True)
class RunFailed(Event):
    type: ClassVar[str] = "run_failed"
    step: int
    error: str
    error_type: str
    traceback: str = ""


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls for cls in (RunStarted, PlanPrediction, Step, Overflow, Census, Memory, Eval, Checkpoint, RunFinished, RunFailed)
}


def event_from_dict(d: dict[str, Any]) -> Event | dict:
    """The typed event for a logged dict; unknown types come back as the plain dict."""
    cls = EVENT_TYPES.get(d.get("type", ""))
    if cls is None:
        return d
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})
