"""GRPO runs of the same seed under different precisions side by side (fp32 vs bf16 vs fp16): the training-inference
mismatch and the reward curves of each, overlaid. Plain Python: ``PrecisionCompare`` folds each run's event log
into a ``RunState`` (the monitor's own model of a run) and says what would make the runs not comparable (different
seeds, prompts or rewards); ``precision_compare.figure`` draws it with plotly, ``PrecisionCompareView`` is the widget
(``workbench.ui.precision_compare_panel``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..runs.layout import EVENTS_FILE
from ..stats import mean
from .run_log import EventTail
from .run_state import RunState

# what must agree for a difference between the runs to be the precision's: the settings a same-seed comparison keeps
SAME_SETTINGS = (
    ("seed",),
    ("model", "source"),
    ("data", "train"),
    ("rl", "prompts"),
    ("rl", "tasks"),
    ("rl", "rewards"),
    ("rl", "scale_rewards"),
    ("rl", "group_size"),
    ("rl", "temperature"),
    ("rl", "max_new_tokens"),
    ("rl", "loss_type"),
    ("rl", "mask_truncated_completions"),
    ("rl", "importance_sampling"),
    ("rl", "pool"),
    ("rl", "step_advantage_weight"),
    ("schedule", "learning_rate"),
    ("schedule", "micro_batch_size"),
    ("schedule", "grad_accum_steps"),
)
METRICS = {
    "mismatch": ("mean_abs", "mean |logp sampler - logp trainer| (nats per token)"),
    "max_mismatch": ("max_abs", "max |logp sampler - logp trainer|"),
    "kl": ("kl", "KL(sampler || trainer) per token"),
    "reward": ("total", "mean reward (weighted total)"),
}


@dataclass
class ComparedRun:
    label: str
    run_dir: Path
    state: RunState = field(default_factory=RunState)
    tail: EventTail | None = None

    def poll(self) -> int:
        if self.tail is None:
            self.tail = EventTail(self.run_dir / EVENTS_FILE, typed=False)
        return self.state.apply(self.tail.poll())

    @property
    def precision(self) -> str | None:
        return (self.state.config.get("precision") or {}).get("mode")


def _setting(config: dict, path: tuple) -> object:
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return config


class PrecisionCompare:
    """GRPO runs side by side. ``labels``: one per run (default: each run's precision.mode, else its folder name).
    ``refresh()`` folds what each log gained since the last call (runs still going are followed)."""

    def __init__(self, run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None):
        if not run_dirs:
            raise ValueError("give at least one run directory to compare")
        if labels is not None and len(labels) != len(run_dirs):
            raise ValueError(f"{len(labels)} labels for {len(run_dirs)} runs: give one label per run, or none")
        self.runs = [ComparedRun(labels[i] if labels else "", Path(d)) for i, d in enumerate(run_dirs)]
        missing = [str(r.run_dir) for r in self.runs if not (r.run_dir / EVENTS_FILE).is_file()]
        if missing:
            raise ValueError(f"no {EVENTS_FILE} in {', '.join(missing)}: give run directories")
        self.refresh()

    def refresh(self) -> int:
        changed = sum(r.poll() for r in self.runs)
        for r in self.runs:
            if not r.label:
                r.label = r.precision or r.run_dir.name
        return changed

    def series(self, metric: str) -> dict[str, tuple[list, list]]:
        """label -> (steps, values) of ``metric`` (a key of METRICS) for each run that has it."""
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
        key = METRICS[metric][0]
        out = {}
        for r in self.runs:
            found = (r.state.rewards if metric == "reward" else r.state.mismatch).get(key)
            if found is not None and found.x:
                out[r.label] = (list(found.x), list(found.y))
        return out

    def differences(self) -> list[str]:
        """What differs between the runs besides the precision: each a sentence (empty: comparable)."""
        notes = []
        for path in SAME_SETTINGS:
            values = {r.label: _setting(r.state.config, path) for r in self.runs}
            if len({repr(v) for v in values.values()}) > 1:
                shown = ", ".join(f"{label} {value!r}" for label, value in values.items())
                notes.append(f"{'.'.join(path)} differs: {shown}")
        not_grpo = [
            r.label
            for r in self.runs
            if (r.state.config.get("training") or {}).get("method") != "grpo" and r.state.config
        ]
        if not_grpo:
            notes.append(f"not GRPO runs (no rollouts to compare): {', '.join(not_grpo)}")
        return notes

    def summary(self) -> list[dict]:
        """One row per run: its label, status, steps, and the mean over its steps of the mismatch and the reward."""
        rows = []
        for r in self.runs:
            row = {"run": r.label, "dir": str(r.run_dir), "status": r.state.status, "steps": r.state.step}
            for metric in ("mismatch", "reward"):
                row[metric] = mean(self.series(metric).get(r.label, ([], []))[1])
            rows.append(row)
        return rows
