"""What a run looks like so far, folded from its events. Plain Python: no widgets, no plotting, no file reading.

``RunState.apply(events)`` folds events (typed dataclasses or the plain dicts of the log) into series and summaries
any view can draw: the notebook panels, a terminal, an extension. Which fields an event has matters, never the order
they were logged in. Reading a log into a state is ``ui.run_log``'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..events import finite_number, number
from ..events.schema import MODEL_STATE_FIELDS

# Event types only rank 0's copy counts for: every rank logs them alike (the same global step, say), so rank 0
# speaks for the run. Other ranks' copies still record their rank but change nothing. Memory, failures and
# diagnoses are per rank and count from any rank.
RANK0_ONLY = frozenset(
    {
        "run_started",
        "plan",
        "step",
        "overflow",
        "census",
        "eval",
        "checkpoint",
        "run_finished",
        "coverage",
        "eval_task",
        "rollout",
        "policy_mismatch",
        "dpo_rewards",
    }
)


def _get(event: Any, name: str, default: Any = None) -> Any:
    if isinstance(event, dict):
        return event.get(name, default)
    return getattr(event, name, default)


@dataclass
class Alert:
    level: str  # info | warning | error | success
    title: str
    detail: str = ""
    step: int | None = None
    kind: str = ""  # the event type that raised it


# A chart's series holds at most about CHART_POINTS + RECENT_STEPS points however long the run: the newest
# RECENT_STEPS steps exactly, and before them one point per bucket of ``stride`` steps, the stride doubling whenever
# the buckets outgrow CHART_POINTS (a resolution that halves as the run doubles). What a series keeps depends only on
# the points folded in, in order, not on how they were batched: a monitor that follows a run draws what one that
# attached at the end draws. Overflows, skipped steps and alerts are lists of their own, never thinned.
CHART_POINTS = 2000
RECENT_STEPS = 500


@dataclass
class Series:
    """Parallel x/y lists (x: steps, growing), thinned as they grow (see CHART_POINTS); views append, never rebuild.
    ``limit=None`` keeps every point (a step logged again still replaces the later ones: a resumed run)."""

    x: list = field(default_factory=list)
    y: list = field(default_factory=list)
    limit: int | None = CHART_POINTS
    recent: int = RECENT_STEPS
    stride: int = 1  # the older points are the first of each bucket of this many steps
    seen: int = 0  # points folded in (kept or not)
    _prev: list = field(default_factory=list, repr=False)  # the x folded in just before each kept point
    _settled: int = field(default=0, repr=False)  # kept points older than the recent window (thinned already)
    _last: Any = field(default=None, repr=False)

    def add(self, x, y) -> None:
        self.seen += 1
        if not isinstance(x, (int, float)):
            self.x.append(x)
            self.y.append(y)
            return
        if self._last is not None and x <= self._last:  # a resumed run logs its steps again from its checkpoint
            keep = next((i for i, v in enumerate(self.x) if v >= x), len(self.x))
            del self.x[keep:], self.y[keep:], self._prev[keep:]
            self._settled = min(self._settled, keep)
            self._last = self.x[-1] if self.x else None
        self.x.append(x)
        self.y.append(y)
        self._prev.append(self._last)
        self._last = x
        if self.limit is not None:
            self._settle(x - self.recent)

    def drops(self, x) -> bool:
        """Whether a point at ``x`` folded in now is certain to go once it leaves the recent window: it is not the
        first of its bucket (a later, coarser stride keeps no more). ``catch_up`` then need not even parse it."""
        return (
            self.limit is not None
            and isinstance(x, int)
            and self._last is not None
            and x > self._last
            and x // self.stride == self._last // self.stride
        )

    def skip(self, x) -> None:
        """Fold in a point that ``drops``: the state is what ``add`` leaves once that point has left the window. (The
        older points it would settle are settled by the next ``add``, to the same result: settling later only
        re-filters them at the coarser stride, which keeps a subset of what the finer one kept.)"""
        self.seen += 1
        self._last = x

    def _first_of_bucket(self, i: int) -> bool:
        prev = self._prev[i]
        return prev is None or self.x[i] // self.stride > prev // self.stride

    def _settle(self, older_than) -> None:
        # points leaving the recent window stay only as the first point of their bucket
        i = self._settled
        while i < len(self.x) and self.x[i] <= older_than:
            if self._first_of_bucket(i):
                i += 1
            else:
                del self.x[i], self.y[i], self._prev[i]
        self._settled = i
        while self._settled > self.limit:  # the buckets outgrew the limit: halve the resolution
            self.stride *= 2
            keep = [j for j in range(self._settled) if self._first_of_bucket(j)]
            for name in ("x", "y", "_prev"):
                values = getattr(self, name)
                setattr(self, name, [values[j] for j in keep] + values[self._settled :])
            self._settled = len(keep)

    def __len__(self) -> int:
        return len(self.x)


@dataclass
class RunState:
    """Everything the monitor shows about one run. ``version`` grows on every change a view must redraw."""

    run_dir: str | None = None
    status: str = "idle"  # idle | starting | running | finished | stopped | failed
    total_steps: int | None = None
    step: int = 0
    eta_s: float | None = None
    tokens_per_s: float | None = None
    precision: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    loss: Series = field(default_factory=Series)
    eval_loss: Series = field(default_factory=Series)
    # "TASK METRIC" -> Series: the task metrics scored during training (eval.tasks), e.g. "identity identity_rate"
    task_metrics: dict = field(default_factory=dict)
    # GRPO (training.method grpo): reward name -> Series of its mean (the weighted "total" too), the mismatch
    # figures -> Series, the latest sample completions, and per step the share of groups without signal
    rewards: dict = field(default_factory=dict)
    # "mean_abs" / "max_abs" / "kl" / "ratio_std" (and "is_capped" with rl.importance_sampling) -> Series
    mismatch: dict = field(default_factory=dict)
    samples: list = field(default_factory=list)  # [{step, prompt, completion, rewards, total, advantage}]
    # "parse_rate" / "all_equal_groups" / "completion_tokens" / "reference_kl" (rl.kl_coef > 0) / "replayed" (rl.pool)
    # -> Series
    rollout_stats: dict = field(default_factory=dict)
    # rl.pool: task family -> Series of its recent success (the share of its last episodes that succeeded)
    pool_success: dict = field(default_factory=dict)
    # DPO (training.method dpo): "margin" / "accuracy" / "reward_chosen" / "reward_rejected" -> Series (dpo_rewards)
    dpo: dict = field(default_factory=dict)
    # DAgger (RUN/dagger/events.jsonl): one {round, success_rate, loop_rate, false_finish_rate, states, kinds, rows,
    # run_dir, status} a round, in round order
    dagger_rounds: list = field(default_factory=list)
    lr: Series = field(default_factory=Series)
    grad_norm: Series = field(default_factory=Series)
    loss_scale: Series = field(default_factory=Series)
    skipped_steps: list = field(default_factory=list)
    overflows: list = field(default_factory=list)  # [{step, scale_before, scale_after, nonfinite_count, params}]
    census: dict | None = None  # latest {step, rows, totals}
    memory: dict = field(default_factory=dict)  # rank -> latest memory event as a dict
    memory_series: dict = field(default_factory=dict)  # "rank0 host_rss" / "cuda:0 allocated" -> Series
    plan: dict | None = None
    coverage: Series = field(default_factory=Series)  # share of matmul FLOPs in fp16/bf16 (diagnosis instruments)
    alerts: list = field(default_factory=list)
    checkpoints: list = field(default_factory=list)
    adapter_path: str | None = None
    final_loss: float | None = None
    error: str | None = None
    ranks: set = field(default_factory=set)
    unknown_types: dict = field(default_factory=dict)  # type -> count, for forward compatibility
    version: int = 0
    # event times of the step events applied since the view last drew: the latency probe
    pending_step_times: list = field(default_factory=list)
    chart_points: int | None = CHART_POINTS  # each series' limit (None: every point, a zoomed window's state)

    def __post_init__(self):
        if self.chart_points != CHART_POINTS:
            for series in self.all_series():
                series.limit = self.chart_points

    def _series(self) -> Series:
        return Series(limit=self.chart_points)

    def all_series(self) -> list:
        """Every series of the state (the per-step ones, and those of memory, task metrics, rewards, mismatch)."""
        return [
            self.loss,
            self.eval_loss,
            self.lr,
            self.grad_norm,
            self.loss_scale,
            self.coverage,
            *self.task_metrics.values(),
            *self.rewards.values(),
            *self.mismatch.values(),
            *self.rollout_stats.values(),
            *self.pool_success.values(),
            *self.dpo.values(),
            *self.memory_series.values(),
        ]

    @property
    def done(self) -> bool:
        return self.status in ("finished", "stopped", "failed")

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    def apply(self, events: Iterable[Any]) -> int:
        """Fold events in; returns how many changed the state."""
        changed = 0
        for event in events:
            kind = _get(event, "type")
            handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
            rank = _get(event, "rank", 0) or 0
            self.ranks.add(rank)
            if handler is None:
                self.unknown_types[kind] = self.unknown_types.get(kind, 0) + 1
                continue
            if rank != 0 and kind in RANK0_ONLY:
                continue
            if handler(event, rank) is not False:
                changed += 1
        if changed:
            self.version += 1
        return changed

    # ---- one handler per event type; return False when nothing visible changed ----------------
    # (apply() has already dropped other ranks' copies of the RANK0_ONLY types)
    def _on_run_started(self, e, rank):
        self.run_dir = _get(e, "run_dir") or self.run_dir
        self.status = "running"
        self.total_steps = _get(e, "total_steps")
        self.step = _get(e, "start_step", 0) or 0
        self.precision = dict(_get(e, "precision") or {})
        self.config = dict(_get(e, "config") or {})

    def _on_plan(self, e, rank):
        self.plan = _get(e, "plan")

    def _on_step(self, e, rank):
        step = _get(e, "step")
        self.step = step
        self.eta_s = number(_get(e, "eta_s"))
        self.tokens_per_s = number(_get(e, "tokens_per_s"))
        loss = finite_number(_get(e, "loss"))
        self.loss.add(step, loss)
        self.lr.add(step, number(_get(e, "lr")))
        self.grad_norm.add(step, finite_number(_get(e, "grad_norm")))
        scale = number(_get(e, "loss_scale"))
        if scale is not None:
            self.loss_scale.add(step, scale)
        if _get(e, "skipped"):
            self.skipped_steps.append(step)
        self.pending_step_times.append(number(_get(e, "time")))
        if self.status in ("idle", "starting"):
            self.status = "running"

    def _on_overflow(self, e, rank):
        o = {
            "step": _get(e, "step"),
            "scale_before": number(_get(e, "scale_before")),
            "scale_after": number(_get(e, "scale_after")),
            "nonfinite_count": _get(e, "nonfinite_count", 0),
            "params": list(_get(e, "nonfinite_params") or []),
        }
        self.overflows.append(o)
        names = ", ".join(o["params"][:3]) + (" ..." if len(o["params"]) > 3 else "")
        self.alerts.append(
            Alert(
                "warning",
                f"step {o['step']}: gradient overflow, step skipped",
                f"loss scale {o['scale_before']:g} -> {o['scale_after']:g}; "
                f"{o['nonfinite_count']} non-finite gradient(s): {names}"
                if o["scale_before"] is not None and o["scale_after"] is not None
                else names,
                o["step"],
                "overflow",
            )
        )

    def _on_census(self, e, rank):
        self.census = {
            "step": _get(e, "step"),
            "rows": list(_get(e, "rows") or []),
            "totals": dict(_get(e, "totals") or {}),
        }

    def _on_memory(self, e, rank):
        d = (
            e
            if isinstance(e, dict)
            else {k: _get(e, k) for k in ("step", "devices", "host_rss", *MODEL_STATE_FIELDS.values())}
        )
        self.memory[rank] = d
        step = d.get("step")
        for dev in d.get("devices") or []:
            for key in ("allocated", "reserved", "peak"):
                if dev.get(key) is not None:
                    self.memory_series.setdefault(f"{dev.get('device')} {key}", self._series()).add(step, dev[key])
        if d.get("host_rss") is not None:
            self.memory_series.setdefault(f"rank{rank} host RSS", self._series()).add(step, d["host_rss"])

    def _on_eval(self, e, rank):
        self.eval_loss.add(_get(e, "step"), finite_number(_get(e, "loss")))

    def _on_eval_task(self, e, rank):
        task = _get(e, "task")
        for name, value in (_get(e, "metrics") or {}).items():
            if name in ("n", "tokens") or isinstance(value, (bool, dict, list, str)):  # counts and breakdowns
                continue
            self.task_metrics.setdefault(f"{task} {name}", self._series()).add(_get(e, "step"), finite_number(value))

    def _on_rollout(self, e, rank):
        step = _get(e, "step")
        self.rewards.setdefault("total", self._series()).add(step, finite_number(_get(e, "reward_mean")))
        for name, figures in (_get(e, "rewards") or {}).items():
            self.rewards.setdefault(name, self._series()).add(step, finite_number((figures or {}).get("mean")))
        for key, value in (
            ("parse_rate", _get(e, "parse_rate")),
            ("all_equal_groups", _get(e, "all_equal_groups")),
            ("completion_tokens", _get(e, "completion_tokens_mean")),
            ("reference_kl", _get(e, "reference_kl")),
        ):
            if value is not None:
                self.rollout_stats.setdefault(key, self._series()).add(step, finite_number(value))
        self.samples = [{"step": step, **sample} for sample in (_get(e, "samples") or [])]
        pool = _get(e, "task_pool") or {}
        for family, figures in (pool.get("families") or {}).items():
            if (figures or {}).get("success") is not None:  # None: no episode of the family played yet
                self.pool_success.setdefault(family, self._series()).add(step, finite_number(figures["success"]))
        if pool:
            self.rollout_stats.setdefault("replayed", self._series()).add(step, finite_number(pool.get("replayed")))

    def _on_policy_mismatch(self, e, rank):
        for key in ("mean_abs", "max_abs", "kl", "ratio_std"):
            self.mismatch.setdefault(key, self._series()).add(_get(e, "step"), finite_number(_get(e, key)))
        for key in ("is_capped",):  # rl.importance_sampling: the share of tokens whose weight the cap changed
            if _get(e, key) is not None:
                self.mismatch.setdefault(key, self._series()).add(_get(e, "step"), finite_number(_get(e, key)))

    def _on_dpo_rewards(self, e, rank):
        for key in ("margin", "accuracy", "reward_chosen", "reward_rejected"):
            self.dpo.setdefault(key, self._series()).add(_get(e, "step"), finite_number(_get(e, key)))

    def _on_dagger_round(self, e, rank):
        keys = (
            "round",
            "model",
            "episodes",
            "success_rate",
            "loop_rate",
            "false_finish_rate",
            "states",
            "kinds",
            "rows",
            "run_dir",
            "status",
            "wall_s",
        )
        row = {k: _get(e, k) for k in keys}
        self.dagger_rounds = sorted(
            [r for r in self.dagger_rounds if r["round"] != row["round"]] + [row], key=lambda r: r["round"]
        )

    def _on_checkpoint(self, e, rank):
        self.checkpoints.append({"step": _get(e, "step"), "path": _get(e, "path"), "kind": _get(e, "kind")})
        if _get(e, "kind") in ("adapter", "model"):
            self.adapter_path = _get(e, "path")

    def _on_run_finished(self, e, rank):
        self.step = _get(e, "step", self.step)
        self.final_loss = finite_number(_get(e, "final_loss"))
        self.adapter_path = _get(e, "adapter_path") or self.adapter_path
        self.eta_s = 0.0
        stopped = bool(_get(e, "stopped"))
        self.status = "stopped" if stopped else "finished"
        reason = _get(e, "stop_reason")
        wall = number(_get(e, "wall_s")) or 0.0
        self.alerts.append(
            Alert(
                "info" if stopped else "success",
                f"run {'stopped' if stopped else 'finished'} at step {self.step} ({wall:.0f} s)",
                reason or "",
                self.step,
                "run_finished",
            )
        )

    def _on_run_failed(self, e, rank):
        self.status = "failed"
        self.error = f"{_get(e, 'error_type', 'Error')}: {_get(e, 'error', '')}"
        saved, saving = _get(e, "checkpoint"), _get(e, "checkpoint_error")
        resume = (f"\n\nstep {_get(e, 'step')} could not be saved after the failure: {saving}" if saving else "") + (
            f"\n\n{'the last checkpoint' if saving else 'step ' + str(_get(e, 'step'))} is saved: continue with "
            f"checkpointing.resume_from={saved}"
            if saved
            else ""
        )
        self.alerts.append(
            Alert(
                "error",
                f"run failed (rank {rank}, step {_get(e, 'step')})",
                self.error + resume + ("\n\n" + _get(e, "traceback") if _get(e, "traceback") else ""),
                _get(e, "step"),
                "run_failed",
            )
        )

    def _on_diagnosis(self, e, rank):
        # From the diagnosis instruments: {step, cause, fix, module}. Handled generically (any extra
        # fields are shown too) so the panel does not depend on the exact schema.
        known = ("type", "v", "time", "rank", "step", "cause", "fix", "module", "kind")
        extra = {k: v for k, v in (e.items() if isinstance(e, dict) else vars(e).items()) if k not in known and v}
        cause, fix, module = _get(e, "cause"), _get(e, "fix"), _get(e, "module")
        detail = "\n".join(
            filter(
                None,
                [
                    f"module: {module}" if module else "",
                    f"fix: {fix}" if fix else "",
                    *(f"{k}: {v}" for k, v in extra.items()),
                ],
            )
        )
        kind = _get(e, "kind")
        title = f"step {_get(e, 'step')}: {cause or 'diagnosis'}" + (f" [{kind}]" if kind else "")
        self.alerts.append(Alert("error", title, detail, _get(e, "step"), "diagnosis"))

    def _on_overflow_origin(self, e, rank):
        module, phase = _get(e, "module"), _get(e, "phase")
        self.alerts.append(
            Alert(
                "warning",
                f"step {_get(e, 'step')}: overflow traced to {module or 'an unknown module'} ({phase})",
                _evidence(_get(e, "evidence")),
                _get(e, "step"),
                "overflow_origin",
            )
        )

    def _on_coverage(self, e, rank):
        share = number(_get(e, "low_precision_share"))
        if share is None:
            return False
        self.coverage.add(_get(e, "step"), share)

    # ---- helpers for views ----------------------------------------------------------------------
    def take_pending_step_times(self) -> list:
        out, self.pending_step_times = self.pending_step_times, []
        return out

    def census_by_group(self) -> dict:
        """{dtype: {group: count}} from the latest census (trainable rows marked with '(trained)')."""
        out: dict = {}
        for row in (self.census or {}).get("rows", []):
            group = row["group"] + (" (trained)" if row.get("trainable") else "")
            out.setdefault(row["dtype"], {})
            out[row["dtype"]][group] = out[row["dtype"]].get(group, 0) + row["count"]
        return out

    def memory_breakdown(self, rank: int = 0) -> dict:
        """Model-state bytes of ``rank`` by category (weights, gradients, optimizer_state, master_weights)."""
        m = self.memory.get(rank) or {}
        return {category: m.get(field, 0) or 0 for category, field in MODEL_STATE_FIELDS.items()}

    def summary(self) -> str:
        parts = [self.status]
        if self.total_steps:
            parts.append(f"step {self.step}/{self.total_steps}")
        if self.loss.y and self.loss.y[-1] is not None:
            parts.append(f"loss {self.loss.y[-1]:.4f}")
        if self.eta_s is not None and not self.done:
            parts.append(f"ETA {format_seconds(self.eta_s)}")
        return " | ".join(parts)


def _evidence(ev: Any) -> str:
    if not ev:
        return ""
    if isinstance(ev, dict):
        return "\n".join(f"{k}: {v}" for k, v in ev.items())
    return str(ev)


def format_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
