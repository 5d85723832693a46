"""Precision policy and the delicate step arithmetic shared by every strategy."""
from .policy import (
    DTYPE_BY_NAME, Hardware, PrecisionPolicy, PrecisionWarning, device_supports_bf16, dtype_name, resolve_device,
    resolve_policy, resolve_precision,
)
from .step import (
    IGNORE_INDEX, StepOutcome, count_target_tokens, nonfinite_grad_params, optimizer_step, token_loss_sum,
    window_loss_divisor,
)

__all__ = [
    "DTYPE_BY_NAME", "Hardware", "PrecisionPolicy", "dtype_name", "PrecisionWarning", "device_supports_bf16", "resolve_device",
    "resolve_policy", "resolve_precision",
    "IGNORE_INDEX", "StepOutcome", "count_target_tokens", "nonfinite_grad_params", "optimizer_step",
    "token_loss_sum", "window_loss_divisor",
]
