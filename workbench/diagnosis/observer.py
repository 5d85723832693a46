"""The precision instruments as one engine observer: coverage sampling, overflow attribution and the
loss-scale collapse diagnosis. ``observers_for(cfg)`` is what an entry point adds to a run."""

from __future__ import annotations

from collections import deque

from ..engine.observers import Observer, RunView
from ..events.schema import Coverage, Diagnosis, OverflowOrigin
from .collapse import ScaleHistory, cause_and_fixes, collapse_reason
from .coverage import CoverageSampler
from .overflow import BatchCapture, LabelIndex, parameter_attribution, replay_attribution


class DiagnosisObserver(Observer):
    def __init__(self, cfg):
        self.cfg = cfg
        self.d = cfg.diagnosis
        self.history = ScaleHistory(self.d.collapse_window)
        self.coverage: CoverageSampler | None = None
        self.capture: BatchCapture | None = None
        self.attributed: deque = deque()  # steps traced within the current window
        self.last_origin: dict | None = None
        self.in_collapse = False
        self.diagnoses: list[Diagnosis] = []

    # ---- hooks ---------------------------------------------------------------------------------
    def setup(self, run: RunView) -> None:
        self.first_step = run.start_step + 1
        if self.d.coverage_every:
            self.coverage = CoverageSampler(run.model)
            self._arm_if_sampled(self.first_step)
        if self.d.attribute_overflows and run.world_size == 1:
            self.capture = BatchCapture(run.model)
            self.labels_for = LabelIndex(run.train_examples)

    def before_optimizer_step(self, run: RunView, step: int) -> None:
        if self.coverage is not None and self.coverage.armed:
            report = self.coverage.disarm()
            if report:
                run.emit(Coverage(step=step, **report))

    def after_step(self, run: RunView, step: int, outcome, loss: float) -> str | None:
        self.history.record(step, outcome.scale_after, outcome.skipped)
        if outcome.skipped:
            self._attribute(run, step, outcome)
        if self.capture is not None:
            self.capture.reset()
        reason = self._check_collapse(run, step)
        self._arm_if_sampled(step + 1)
        return reason

    def finish(self, run: RunView) -> None:
        if self.coverage is not None:
            self.coverage.disarm()
        if self.capture is not None:
            self.capture.remove()

    # ---- parts ---------------------------------------------------------------------------------
    def _arm_if_sampled(self, step: int) -> None:
        every = self.d.coverage_every
        if (
            self.coverage is not None
            and step <= self.cfg.schedule.max_steps
            and (step == self.first_step or step % every == 0)
        ):
            self.coverage.arm()

    def _attribute(self, run: RunView, step: int, outcome) -> None:
        while self.attributed and self.attributed[0] <= step - self.d.collapse_window:
            self.attributed.popleft()
        if len(self.attributed) >= self.d.attribute_overflows:
            if self.last_origin is None:  # free: the step already named the parameters
                self.last_origin = parameter_attribution(run, outcome.nonfinite_params)
            return
        self.attributed.append(step)
        if self.capture is not None and self.capture.window:
            origin = replay_attribution(run, self.labels_for, self.capture.window, outcome.scale_before)
        else:
            origin = parameter_attribution(run, outcome.nonfinite_params)
        if origin["phase"] == "not_reproduced" and outcome.nonfinite_params:
            fallback = parameter_attribution(run, outcome.nonfinite_params)
            origin = {**fallback, "evidence": {**fallback["evidence"], "replay": origin["evidence"]}}
        self.last_origin = origin
        run.emit(OverflowOrigin(step=step, phase=origin["phase"], module=origin["module"], evidence=origin["evidence"]))

    def _check_collapse(self, run: RunView, step: int) -> str | None:
        reason = collapse_reason(self.history, self.d.scale_floor, self.d.collapse_skips)
        if reason is None:
            self.in_collapse = False
            return None
        if self.in_collapse:  # one diagnosis per episode
            return None
        self.in_collapse = True
        cause, fixes = cause_and_fixes(
            run.precision.mode, self.last_origin, self.history, run.cfg.schedule.learning_rate
        )  # as the engine resolved it
        module = self.last_origin.get("module") if self.last_origin else None
        stop = self.d.stop_on_collapse
        event = Diagnosis(
            step=step,
            kind="scale_collapse",
            cause=cause,
            fix="; or ".join(f["fix"] for f in fixes),
            module=module,
            evidence={
                "trigger": reason,
                "mode": run.precision.mode,
                "skips_in_window": self.history.skips,
                "window": len(self.history.recent),
                "scale": self.history.scale,
                "scale_floor": self.d.scale_floor,
                "scale_history": list(self.history.changes),
                "recent": [list(r) for r in self.history.recent],
                "clean_steps_before_first_skip": self.history.clean_steps_before_first_skip,
                "origin": self.last_origin,
                "fixes": fixes,
            },
            stopping=stop,
        )
        self.diagnoses.append(event)
        run.emit(event)
        if stop:
            return f"diagnosis: {reason}" + (f" (origin: {module})" if module else "") + f"; fix: {fixes[0]['fix']}"
        return None


def observers_for(cfg) -> list[Observer]:
    """The instruments a run's config asks for (composed by the entry points, not by the engine)."""
    return [DiagnosisObserver(cfg)] if cfg.diagnosis.enabled else []
