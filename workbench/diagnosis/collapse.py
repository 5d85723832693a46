"""Loss-scale history and the scale-collapse detector, with the likely cause and its fix."""

from __future__ import annotations

import re
from collections import deque

FP16_MAX = 65504.0


class ScaleHistory:
    """Recent steps (scale after the step, skipped?) plus every change of the scale, capped."""

    def __init__(self, window: int, max_changes: int = 200):
        self.recent: deque = deque(maxlen=window)
        self.changes: list = []  # [step, scale] whenever the scale changed
        self.max_changes = max_changes
        self.clean_steps_before_first_skip: int | None = None
        self._clean = 0

    def record(self, step: int, scale: float | None, skipped: bool) -> None:
        self.recent.append((step, scale, skipped))
        if scale is not None and (not self.changes or self.changes[-1][1] != scale):
            self.changes.append([step, scale])
            if len(self.changes) > self.max_changes:  # keep the first (initial scale) and the latest
                del self.changes[1]
        if skipped and self.clean_steps_before_first_skip is None:
            self.clean_steps_before_first_skip = self._clean
        self._clean += not skipped

    @property
    def skips(self) -> int:
        return sum(1 for _, _, s in self.recent if s)

    @property
    def scale(self) -> float | None:
        return self.recent[-1][1] if self.recent else None


def collapse_reason(history: ScaleHistory, floor: float, min_skips: int) -> str | None:
    scale = history.scale
    if scale is not None and scale <= floor and history.recent and history.recent[-1][2]:
        return f"the loss scale fell to {scale:g} (floor {floor:g}) and steps still overflow"
    if history.skips >= min_skips:
        return f"{history.skips} of the last {len(history.recent)} steps were skipped (non-finite gradients)"
    return None


def cause_and_fixes(mode: str, origin: dict | None, history: ScaleHistory, lr: float) -> tuple[str, list[dict]]:
    """The likely cause (text) and fixes, most promising first: {fix, override} where override is the
    config change (dotted key -> value) that applies it."""
    module = origin.get("module") if origin else None
    phase = origin.get("phase") if origin else None
    late = (history.clean_steps_before_first_skip or 0) >= 10  # overflows began after clean training
    if phase == "forward":
        ev = origin.get("evidence", {})
        cause = (
            f"activations overflow {ev.get('output_dtype', mode)} in the forward pass at {module} "
            f"({ev.get('module_type', 'module')} output holds inf/nan from finite inputs; fp16's largest value "
            f"is {FP16_MAX:g}). Loss scaling cannot fix a forward overflow, so every step skips and the scale collapses"
        )
    elif phase == "backward":
        cause = (
            f"gradients overflow in the backward pass at {module} "
            f"(first non-finite: {origin['evidence'].get('first_nonfinite')}) even as the loss scale backs off"
        )
    elif phase == "loss":
        cause = "the loss itself is non-finite while every module output is finite"
    else:
        cause = "gradients are non-finite" + (f" (first seen at {module})" if module else "")
    if late:
        cause += "; the first overflow came after clean steps, as when weights grow under too high a learning rate"
    fixes = []
    if mode == "fp16":
        fixes.append(
            {
                "fix": "switch to bf16 (precision.mode=bf16): fp32's exponent range, no loss scaling needed",
                "override": {"precision.mode": "bf16"},
            }
        )
    if module and module != "loss":
        pattern = re.escape(module) + "$"
        fixes.append(
            {
                "fix": f"keep {module} in fp32 (precision.module_rules=[{{pattern: '{pattern}', compute: float32}}])",
                "override": {"precision.module_rules": [{"pattern": pattern, "compute": "float32"}]},
            }
        )
    lower = {
        "fix": f"lower the learning rate (schedule.learning_rate={lr / 10:g})",
        "override": {"schedule.learning_rate": lr / 10},
    }
    fixes.insert(0 if late and mode != "fp16" else len(fixes), lower)
    return cause, fixes
