"""Run events: schema, writer, reader."""

from .log import EventWriter, finite_number, number
from .reader import iter_events, read_events
from .schema import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    Census,
    Checkpoint,
    Eval,
    Event,
    Memory,
    Overflow,
    PlanPrediction,
    RunFailed,
    RunFinished,
    RunStarted,
    Step,
    event_from_dict,
)

__all__ = [
    "EventWriter",
    "finite_number",
    "iter_events",
    "number",
    "read_events",
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "Census",
    "Checkpoint",
    "Eval",
    "Event",
    "Memory",
    "Overflow",
    "PlanPrediction",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "Step",
    "event_from_dict",
]
