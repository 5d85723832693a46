"""Precision policy and the delicate step arithmetic shared by every strategy."""
from .policy import (
    Hardware, PrecisionPolicy, PrecisionWarning, device_supports_bf16, inference_dtype,
    resolve_device, resolve_policy, resolve_precision,
)
from .step import (
    StepOutcome, count_target_tokens, nonfinite_grad_params, optimizer_step, target_loss_sum, token_loss_sum,
    window_loss_divisor,
)

__all__ = [
    "Hardware", "PrecisionPolicy", "PrecisionWarning", "device_supports_bf16", "inference_dtype", "resolve_device",
    "resolve_policy", "resolve_precision",
    "StepOutcome", "count_target_tokens", "nonfinite_grad_params", "optimizer_step",
    "target_loss_sum", "token_loss_sum", "window_loss_divisor",
]
