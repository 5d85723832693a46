"""Precision diagnosis: autocast coverage, overflow attribution and the
loss-scale collapse detector. See docs/precision.md."""

from .collapse import ScaleHistory, cause_and_fixes, collapse_reason
from .coverage import CoverageSampler
from .observer import DiagnosisObserver, observers_for
from .overflow import BatchCapture, LabelIndex, parameter_attribution, replay_attribution

__all__ = [
    "ScaleHistory",
    "cause_and_fixes",
    "collapse_reason",
    "CoverageSampler",
    "DiagnosisObserver",
    "observers_for",
    "BatchCapture",
    "LabelIndex",
    "parameter_attribution",
    "replay_attribution",
]
