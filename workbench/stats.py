"""The two summaries every layer reports over flags and figures that may not apply: a rate and a mean, each over the
values that apply (None left out), None when none does. One definition, so that a success rate in an evaluation, an
episode's loop rate and an export's action agreement are the same arithmetic."""

from __future__ import annotations

from collections.abc import Iterable


def rate(flags: Iterable) -> float | None:
    """The share of true values among the flags that apply (not None); None when none applies."""
    applicable = [bool(f) for f in flags if f is not None]
    return sum(applicable) / len(applicable) if applicable else None


def mean(values: Iterable) -> float | None:
    """The mean of the values that apply (not None); None when none applies."""
    applicable = [float(v) for v in values if v is not None]
    return sum(applicable) / len(applicable) if applicable else None
