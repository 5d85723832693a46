"""Overflow attribution: which module's values went non-finite first.

An overflow is known only after the step's backward, when the evidence (activations, the order in
which gradients appeared) is gone. So on an overflow step, and only on a bounded number of them, the
window's micro-batches are replayed with hooks on every module:

* forward: the first module (in execution order; children finish before parents, so the innermost)
  whose output holds inf/nan while its floating inputs are finite. A forward overflow makes the loss
  non-finite at any loss scale: loss scaling cannot fix it, and the scale collapses.
* backward (the loss is finite): tensor hooks on module outputs and on trained parameters fire in
  backward order; the first non-finite gradient locates the overflow. A non-finite gradient w.r.t.
  module M's output was produced downstream of M, so the culprit reported is the module whose output
  gradient was the last one still finite (with M in the evidence); a non-finite parameter gradient
  names its own module.

The replay is exact: the weights did not change (the step was skipped), the micro-batches and the
RNG state at each forward are captured by a forward pre-hook on the model (references and a 5 KB RNG
copy per micro-batch), labels come from the training examples, and the loss is scaled by the scale
the step used. The global RNG is restored afterwards and the replay's gradients are cleared, so the
training trajectory is the same as without diagnosis. Under multi-process training a replay would
need every rank's collectives; there the attribution falls back to the parameter gradients.
"""

from __future__ import annotations

import math

import torch

from ..data import IGNORE_INDEX
from ..dtypes import dtype_name
from ..forward import batch_loss_sum
from ..precision import count_target_tokens, window_loss_divisor
from ..precision.module_rules import display_name, short_name


def _floats(obj, out: list) -> list:
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _floats(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _floats(o, out)
    return out


def _finite(tensors) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors)


class BatchCapture:
    """Keeps the current window's micro-batch inputs and RNG states (no copies of the inputs)."""

    def __init__(self, model: torch.nn.Module):
        self.window: list[dict] = []
        self._handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        if not (module.training and torch.is_grad_enabled()):
            return None  # eval forwards and replays are not the window's
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return None
        rng = {"cpu": torch.get_rng_state()}
        if ids.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(ids.device)
        # every input the forward took (a vision batch's pixel values and grids too), for an exact replay
        inputs = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        inputs.setdefault("input_ids", ids)
        self.window.append(
            {"input_ids": ids, "attention_mask": kwargs.get("attention_mask"), "inputs": inputs, "rng": rng}
        )
        return None

    def reset(self) -> None:
        self.window = []

    def remove(self) -> None:
        self._handle.remove()


class _Tracer:
    def __init__(self, model: torch.nn.Module, trained: list[tuple[str, torch.nn.Parameter]]):
        self.forward_origin: dict | None = None
        self.backward_events: list[tuple[str, str, bool]] = []  # (module name, kind, finite) in firing order
        self.handles = []
        for name, module in model.named_modules():
            if name:
                self.handles.append(module.register_forward_hook(self._forward_hook(name), with_kwargs=True))
        owner = {}
        for name, module in model.named_modules():
            for pname, p in module.named_parameters(recurse=False):
                owner[id(p)] = name
        for pname, p in trained:
            module = owner.get(id(p), pname.rsplit(".", 1)[0])
            self.handles.append(p.register_post_accumulate_grad_hook(self._param_hook(module)))

    def _forward_hook(self, name: str):
        def hook(module, args, kwargs, out):
            outs = _floats(out, [])
            if self.forward_origin is None and outs and not _finite(outs):
                inputs = _floats(args, []) + _floats(kwargs, [])
                if _finite(inputs):
                    bad = next(t for t in outs if not torch.isfinite(t).all())
                    finite_in = [t.detach().abs().max().item() for t in inputs if t.numel()]
                    self.forward_origin = {
                        "module": name,
                        "module_type": type(module).__name__,
                        "output_dtype": dtype_name(bad.dtype),
                        "output_inf": int(torch.isinf(bad).sum()),
                        "output_nan": int(torch.isnan(bad).sum()),
                        "input_abs_max": max(finite_in) if finite_in else None,
                    }
            if torch.is_grad_enabled():
                for t in outs:
                    if t.requires_grad:
                        t.register_hook(self._grad_hook(name))

        return hook

    def _grad_hook(self, name: str):
        def hook(grad):
            self.backward_events.append((name, "output_grad", bool(torch.isfinite(grad).all())))

        return hook

    def _param_hook(self, module: str):
        def hook(p):
            self.backward_events.append((module, "param_grad", bool(torch.isfinite(p.grad).all())))

        return hook

    def backward_origin(self) -> dict | None:
        last_finite = None
        for i, (name, kind, finite) in enumerate(self.backward_events):
            if finite:
                if kind == "output_grad":
                    last_finite = name
                continue
            if kind == "param_grad":
                return {
                    "module": name,
                    "first_nonfinite": f"gradient of {short_name(name)}'s trained parameters",
                    "last_finite_output_grad": short_name(last_finite) if last_finite else None,
                    "event_index": i,
                }
            return {
                "module": last_finite or "loss",
                "first_nonfinite": f"gradient w.r.t. {short_name(name)}'s output",
                "last_finite_output_grad": short_name(last_finite) if last_finite else None,
                "event_index": i,
            }
        return None

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


class LabelIndex:
    """The labels the engine collated for replayed rows, found by their token ids (built on first use).
    A row not found (data changed under the run) gets next-token labels over its non-pad tokens."""

    def __init__(self, examples):
        self._examples = examples
        self._index: dict | None = None

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if self._index is None:
            self._index = {tuple(e.input_ids): e for e in self._examples}
        rows = []
        lengths = mask.sum(dim=1).tolist() if mask is not None else [ids.shape[1]] * ids.shape[0]
        for row, n in zip(ids.tolist(), lengths):
            ex = self._index.get(tuple(row[:n]))
            rows.append(ex.labels if ex is not None else row[:n])
        labels = torch.full((len(rows), ids.shape[1]), IGNORE_INDEX, dtype=torch.long)
        for i, r in enumerate(rows):
            labels[i, : len(r)] = torch.tensor(r)
        return labels.to(ids.device)


def _set_rng(state: dict, device) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def replay_attribution(run, labels_for: LabelIndex, window: list[dict], scale: float | None) -> dict:
    """Replay an overflow window of ``run`` (a RunView) with tracing hooks; a dict {phase, module, evidence}."""
    model = run.model
    window = list(window)  # the capture hook appends the replay's own forwards to the live list
    device = window[0]["input_ids"].device
    saved = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        saved["cuda"] = torch.cuda.get_rng_state(device)
    labels = [labels_for(mb["input_ids"], mb["attention_mask"]) for mb in window]
    divisor = window_loss_divisor(sum(count_target_tokens(lb) for lb in labels))
    tracer = _Tracer(model, run.named_trainable)
    try:
        for k, (mb, lb) in enumerate(zip(window, labels)):
            _set_rng(mb["rng"], device)
            loss = batch_loss_sum(
                model, {**mb["inputs"], "labels": lb}, run.precision.autocast, run.cfg.memory
            )  # training's forward
            if tracer.forward_origin is not None:
                origin = tracer.forward_origin
                return {
                    "phase": "forward",
                    "module": display_name(origin["module"]),
                    "evidence": {
                        **origin,
                        "module": short_name(origin["module"]),
                        "micro_batch": k,
                        "loss": float(loss.detach()),
                    },
                }
            if not math.isfinite(float(loss.detach())):
                return {
                    "phase": "loss",
                    "module": None,
                    "evidence": {
                        "micro_batch": k,
                        "loss": float(loss.detach()),
                        "note": "every module output was finite; the loss itself is not",
                    },
                }
            scaled = loss / divisor * (scale if scale is not None else 1.0)
            scaled.backward()
            origin = tracer.backward_origin()
            if origin is not None:
                module = origin["module"]
                return {
                    "phase": "backward",
                    "module": display_name(module) if module != "loss" else "loss",
                    "evidence": {
                        **origin,
                        "module": short_name(module),
                        "micro_batch": k,
                        "scale": scale,
                        "loss": float(loss.detach()),
                    },
                }
        return {
            "phase": "not_reproduced",
            "module": None,
            "evidence": {
                "micro_batches": len(window),
                "scale": scale,
                "note": "no single micro-batch overflowed on replay (the accumulated sum may have)",
            },
        }
    finally:
        tracer.remove()
        run.zero_grad()
        _set_rng(saved, device)


def parameter_attribution(run, nonfinite_params: list[str]) -> dict:
    """Fallback without a replay: of the parameters with non-finite gradients, the one nearest the
    output (parameters are registered roughly in forward order, and backward runs in reverse)."""
    order = {n: i for i, (n, _) in enumerate(run.named_trainable)}
    known = sorted((order[n], n) for n in nonfinite_params if n in order)
    if not known:
        return {"phase": "parameter_grads", "module": None, "evidence": {"nonfinite_params": nonfinite_params[:10]}}
    name = known[-1][1]
    return {
        "phase": "parameter_grads",
        "module": display_name(name.rsplit(".", 1)[0]),
        "evidence": {"parameter": short_name(name), "nonfinite_params": len(nonfinite_params)},
    }
