"""Memory planner: predict GPU/host memory per device from a model config alone, measure the same
categories on a live run, and fact-check published memory claims (plan.factcheck.DOCUMENTS).

Engine API: ``predict_for_run(cfg, policy, world_size=1, ...) -> Plan`` (emit ``plan.to_dict()`` at
start), ``measure_model_state(model, optimizer) -> dict`` and ``compare(plan, measured) -> rows``.
"""

from .activations import ActivationEstimate, ActivationInputs, estimate_activations, measure_saved_activations
from .arch import PRESETS, PlannedCensus, load_model_config, planned_census
from .model_state import (
    MEASURED_NAMES,
    STATE_CATEGORIES,
    ComparisonRow,
    ModelState,
    compare,
    format_comparison,
    measure_model_state,
)
from .planner import (
    DEFAULT_DEVICES,
    DeviceSet,
    Matrix,
    Plan,
    Setting,
    cost_key,
    plan_matrix,
    policy_for,
    predict,
    predict_for_run,
)

__all__ = [
    "ActivationEstimate",
    "ActivationInputs",
    "estimate_activations",
    "measure_saved_activations",
    "PRESETS",
    "PlannedCensus",
    "planned_census",
    "load_model_config",
    "DEFAULT_DEVICES",
    "DeviceSet",
    "Matrix",
    "Plan",
    "Setting",
    "cost_key",
    "plan_matrix",
    "policy_for",
    "predict",
    "predict_for_run",
    "MEASURED_NAMES",
    "STATE_CATEGORIES",
    "ComparisonRow",
    "ModelState",
    "compare",
    "format_comparison",
    "measure_model_state",
]
