"""Model-state bytes (weights, gradients, optimizer state, master weights): predicted from the census
and measured from a live model + optimizer, under the same four names so they compare one to one."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..events.schema import MODEL_STATE_FIELDS
from ..models.quantize import quantized_kind, stored_bytes
from .arch import PlannedCensus

MEASURED_NAMES = MODEL_STATE_FIELDS  # category -> the memory event field that carries it as measured
STATE_CATEGORIES = tuple(MODEL_STATE_FIELDS)
ADAMW_STEP_BYTES = 4  # torch AdamW keeps a float32 scalar 'step' tensor per parameter (on the CPU)


@dataclass(frozen=True)
class ModelState:
    """Bytes of one process's model state.

    ``master_weights`` is an fp32 copy held *in addition* to the weights the model computes with
    (DeepSpeed's mixed-precision optimizers). Under torch AMP and FSDP2 the fp32 parameters are
    themselves the master weights and count under ``weights``; there the category is 0.
    """

    weights: int
    gradients: int
    optimizer_state: int
    master_weights: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer_state + self.master_weights

    def to_dict(self) -> dict:
        return {**asdict(self), "total": self.total}


def predict_single_process_state(c: PlannedCensus) -> ModelState:
    """One process, torch AdamW over the trainable parameters, dtypes from the precision policy.

    Parameters that get no gradient (a VL model's vision tower under text-only data) hold no
    ``.grad`` and torch AdamW creates no state for them.
    """
    learning = [p for p in c.params if p.trainable and p.reached]
    return ModelState(
        weights=c.bytes(),
        gradients=sum(p.nbytes for p in learning),
        optimizer_state=sum(2 * p.nbytes + ADAMW_STEP_BYTES for p in learning),
        master_weights=0,
    )


def _nbytes(t: torch.Tensor) -> int:
    """Bytes this process holds: the local shard of an FSDP2 DTensor, DeepSpeed ZeRO-3's partition
    (parameters under stage3_param_persistence_threshold stay whole on every rank: their full size)."""
    if hasattr(t, "to_local"):
        t = t.to_local()
    elif getattr(t, "ds_tensor", None) is not None and not getattr(t, "ds_persist", False):
        t = t.ds_tensor  # ZeRO-3: .data is an empty placeholder outside forward
    return t.numel() * t.element_size()


def _weights_bytes(model: torch.nn.Module, params: list) -> int:
    """Bytes of ``params``, a quantized base's weight with its quantization constants (``models.quantize``)."""
    quantized = {id(m.weight): m for m in model.modules() if quantized_kind(m)}
    storages: set = set()
    return sum(stored_bytes(quantized[id(p)], storages) if id(p) in quantized else _nbytes(p) for p in params)


def measure_model_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict:
    """Measured model-state bytes under the prediction's names.

    Call it after ``backward`` and before ``zero_grad`` (gradients are freed by
    ``zero_grad(set_to_none=True)``); optimizer state exists from the first ``step`` on.
    ``master_weights`` counts tensors the optimizer updates that are not model parameters (a separate
    fp32 copy); 0 for torch optimizers over the model's own parameters.
    """
    params = list(model.parameters())  # de-duplicated: tied weights count once
    own = {id(p) for p in params}
    out = {
        "weights": _weights_bytes(model, params),
        "gradients": sum(_nbytes(p.grad) for p in params if p.grad is not None),
        "optimizer_state": 0,
        "master_weights": 0,
    }
    if optimizer is not None:
        out["optimizer_state"] = sum(
            _nbytes(v) for st in optimizer.state.values() for v in st.values() if torch.is_tensor(v)
        )
        out["master_weights"] = sum(_nbytes(p) for g in optimizer.param_groups for p in g["params"] if id(p) not in own)
    return out


@dataclass(frozen=True)
class ComparisonRow:
    category: str
    predicted: int
    measured: int

    @property
    def error(self) -> int:
        return self.predicted - self.measured

    @property
    def relative_error(self) -> float | None:
        return None if self.measured == 0 else self.error / self.measured

    def to_dict(self) -> dict:
        return {
            "category": self.category,
            "predicted": self.predicted,
            "measured": self.measured,
            "error": self.error,
            "relative_error": self.relative_error,
        }


def compare(predicted, measured: dict, categories=None) -> list[ComparisonRow]:
    """Rows of predicted vs measured bytes per category. ``predicted``: a Plan, a ModelState or a dict
    of bytes; only categories present in both are compared (e.g. activations need a measurement)."""
    if hasattr(predicted, "comparable"):
        predicted = predicted.comparable()
    elif hasattr(predicted, "to_dict"):
        predicted = predicted.to_dict()
    cats = categories or [k for k in predicted if k in measured and k != "total"]
    return [ComparisonRow(k, int(predicted[k]), int(measured[k])) for k in cats]


def format_comparison(rows: list[ComparisonRow]) -> str:
    lines = [f"{'category':<18}{'predicted':>16}{'measured':>16}{'error':>14}{'rel':>9}"]
    for r in rows:
        rel = "-" if r.relative_error is None else f"{100 * r.relative_error:+.1f}%"
        lines.append(f"{r.category:<18}{r.predicted:>16,}{r.measured:>16,}{r.error:>+14,}{rel:>9}")
    return "\n".join(lines)
