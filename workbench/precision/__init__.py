"""Precision policy (resolved against ``workbench.hardware``) and the delicate step arithmetic shared by every
strategy."""

from .policy import PrecisionPolicy, PrecisionWarning, inference_dtype, resolve_policy, resolve_precision
from .step import (
    StepOutcome,
    count_target_tokens,
    nonfinite_grad_params,
    optimizer_step,
    target_loss_sum,
    target_losses,
    token_loss_sum,
    window_loss_divisor,
)

__all__ = [
    "PrecisionPolicy",
    "PrecisionWarning",
    "inference_dtype",
    "resolve_policy",
    "resolve_precision",
    "StepOutcome",
    "count_target_tokens",
    "nonfinite_grad_params",
    "optimizer_step",
    "target_loss_sum",
    "target_losses",
    "token_loss_sum",
    "window_loss_divisor",
]
