"""Precision diagnosis: per-module precision rules, autocast coverage, overflow attribution and the
loss-scale collapse detector. See docs/precision.md."""
from .collapse import ScaleHistory, cause_and_fixes, collapse_reason
from .coverage import CoverageSampler
from .observer import DiagnosisObserver, ModulePrecisionObserver
from .overflow import BatchCapture, parameter_attribution, replay_attribution
from .rules import Rule, apply_module_rules, display_name, family_default_rules, resolve_rules, run_in_fp32

__all__ = [
    "ScaleHistory", "cause_and_fixes", "collapse_reason", "CoverageSampler", "DiagnosisObserver",
    "ModulePrecisionObserver", "BatchCapture", "parameter_attribution", "replay_attribution", "Rule",
    "apply_module_rules", "display_name", "family_default_rules", "resolve_rules", "run_in_fp32",
]
