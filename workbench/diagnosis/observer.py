"""The engine observers of this package: per-module precision rules, and the precision instruments
(coverage sampling, overflow attribution, loss-scale collapse diagnosis)."""
from __future__ import annotations

from collections import deque
from typing import Optional

from ..engine.observers import Observer
from ..events.schema import Coverage, Diagnosis, OverflowOrigin, PrecisionRules
from ..models.loading import model_family
from .collapse import ScaleHistory, cause_and_fixes, collapse_reason
from .coverage import CoverageSampler
from .overflow import BatchCapture, parameter_attribution, replay_attribution
from .rules import apply_module_rules, resolve_rules


class ModulePrecisionObserver(Observer):
    """Applies ``precision.module_rules`` and the family defaults once the model exists."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.reports: Optional[list] = None
        self._emitted = False

    def setup(self, engine) -> None:
        family = model_family(getattr(engine.model, "config", None))
        rules = resolve_rules(self.cfg, family, engine.policy.mode)
        self.reports = apply_module_rules(engine.model, rules, engine.policy.device_type) if rules else []

    def before_optimizer_step(self, engine, step: int) -> None:
        # Emitted here rather than in setup: setup runs before run_started, which must open the log.
        if not self._emitted and self.reports:
            engine.writer.emit(PrecisionRules(step=step - 1, rules=self.reports))
        self._emitted = True


class DiagnosisObserver(Observer):
    def __init__(self, cfg):
        self.cfg = cfg
        self.d = cfg.diagnosis
        self.history = ScaleHistory(self.d.collapse_window)
        self.coverage: Optional[CoverageSampler] = None
        self.capture: Optional[BatchCapture] = None
        self.attributed: deque = deque()  # steps traced within the current window
        self.last_origin: Optional[dict] = None
        self.in_collapse = False
        self.diagnoses: list[Diagnosis] = []

    # ---- hooks ---------------------------------------------------------------------------------
    def setup(self, engine) -> None:
        self.first_step = engine.state.step + 1
        if self.d.coverage_every:
            self.coverage = CoverageSampler(engine.model)
            self._arm_if_sampled(self.first_step)
        if self.d.attribute_overflows and engine.ctx.world_size == 1:
            self.capture = BatchCapture(engine.model)

    def before_optimizer_step(self, engine, step: int) -> None:
        if self.coverage is not None and self.coverage.armed:
            report = self.coverage.disarm()
            if report:
                engine.writer.emit(Coverage(step=step, **report))

    def after_step(self, engine, step: int, outcome, loss: float) -> Optional[str]:
        self.history.record(step, outcome.scale_after, outcome.skipped)
        if outcome.skipped:
            self._attribute(engine, step, outcome)
        if self.capture is not None:
            self.capture.reset()
        reason = self._check_collapse(engine, step)
        self._arm_if_sampled(step + 1)
        return reason

    def finish(self, engine) -> None:
        if self.coverage is not None:
            self.coverage.disarm()
        if self.capture is not None:
            self.capture.remove()

    # ---- parts ---------------------------------------------------------------------------------
    def _arm_if_sampled(self, step: int) -> None:
        every = self.d.coverage_every
        if self.coverage is not None and step <= self.cfg.schedule.max_steps and (step == self.first_step or step % every == 0):
            self.coverage.arm()

    def _attribute(self, engine, step: int, outcome) -> None:
        while self.attributed and self.attributed[0] <= step - self.d.collapse_window:
            self.attributed.popleft()
        if len(self.attributed) >= self.d.attribute_overflows:
            if self.last_origin is None:  # free: the step already named the parameters
                self.last_origin = parameter_attribution(engine, outcome.nonfinite_params)
            return
        self.attributed.append(step)
        if self.capture is not None and self.capture.window:
            origin = replay_attribution(engine, self.capture.window, outcome.scale_before)
        else:
            origin = parameter_attribution(engine, outcome.nonfinite_params)
        if origin["phase"] == "not_reproduced" and outcome.nonfinite_params:
            fallback = parameter_attribution(engine, outcome.nonfinite_params)
            origin = {**fallback, "evidence": {**fallback["evidence"], "replay": origin["evidence"]}}
        self.last_origin = origin
        engine.writer.emit(OverflowOrigin(step=step, phase=origin["phase"], module=origin["module"],
                                          evidence=origin["evidence"]))

    def _check_collapse(self, engine, step: int) -> Optional[str]:
        reason = collapse_reason(self.history, self.d.scale_floor, self.d.collapse_skips)
        if reason is None:
            self.in_collapse = False
            return None
        if self.in_collapse:  # one diagnosis per episode
            return None
        self.in_collapse = True
        cause, fixes = cause_and_fixes(engine.policy.mode, self.last_origin, self.history,
                                       self.cfg.schedule.learning_rate)
        module = self.last_origin.get("module") if self.last_origin else None
        stop = self.d.stop_on_collapse
        event = Diagnosis(
            step=step, kind="scale_collapse", cause=cause, fix="; or ".join(f["fix"] for f in fixes), module=module,
            evidence={"trigger": reason, "mode": engine.policy.mode, "skips_in_window": self.history.skips,
                      "window": len(self.history.recent), "scale": self.history.scale, "scale_floor": self.d.scale_floor,
                      "scale_history": list(self.history.changes),
                      "recent": [list(r) for r in self.history.recent],
                      "clean_steps_before_first_skip": self.history.clean_steps_before_first_skip,
                      "origin": self.last_origin, "fixes": fixes},
            stopping=stop)
        self.diagnoses.append(event)
        engine.writer.emit(event)
        if stop:
            return f"diagnosis: {reason}" + (f" (origin: {module})" if module else "") + f"; fix: {fixes[0]['fix']}"
        return None
