"""The fair baselines of an RL recipe (a recipe's ``baselines``): what else its start becomes in the same wall time.

A method over an SFT start (GRPO) claims more than "better than the start": it must beat what the same compute buys
otherwise (DigiRL, arXiv 2406.11896: filtered behaviour cloning on the agent's own successes is a strong baseline).
From the start model the recipe's run started from, for the wall time its own training took (``wall_s``), every
playing, labelling and training counted in it:

* ``sft_continued``: the start recipe's training continued (its data, its settings) for as many steps as that wall
  time holds at the start run's own fastest step (a busy machine only slows a step: a start trained beside other
  jobs had a median of 24.3 s a step where the same recipe alone takes 10.9 s, which halved its baseline's steps),
  less what a run costs besides its steps (its worker's start, the model's building, the rows' tokenizing, the
  saving: ``run_overhead_s`` of the start run, then of the last run trained here; every baseline plans with it);
* ``filtered_bc``: the start model's episodes of the recipe's RL tasks (below), its successful ones as training rows
  (``agent.record``), and the start recipe's training on them for what is left of the wall time;
* ``dagger``: DAgger's rounds from the start model on the RL tasks (``dagger.dagger_rounds``: round 1 labels the
  start's episodes, later rounds play the previous round's model; the expert labels every state it was asked at;
  each round trains the start recipe's settings on its rows and every round's labels, the labels repeated to
  ``baseline_settings.dagger_label_share`` of them), each round's steps at the start run's fastest step from what is
  left (``dagger.TimeBudget``: at most ``baseline_settings.dagger_rounds`` rounds, a further one only while each
  still trains as long as a round plays);
* ``dpo``: the expert's preference pairs at the states where the start's episodes left a shortest path
  (``agent.labels``: its reply rejected, the expert's chosen), and DPO on them (``training.method dpo``, the start
  recipe's settings, ``baseline_settings.dpo_learning_rate``) for what is left; when the steps see fewer pairs than
  there are, the loops first, then the false finishes, then the rest (the mistakes an agent is stuck in);
* ``dagger_dpo``: DAgger as above within the start's playing and half of the rest of the wall time, then DPO on the
  pairs of every round it played, from its last model, for what is left: the two parts train about equally long
  when DAgger plays one round (its later rounds' playing comes out of its own half).

The RL tasks are played once per start (rl.tasks as rl.observation shows them, greedy, up to rl.episode_max_steps
steps, through the one judge with its replay key): every baseline that needs them reads the same episodes, and each is
charged the playing's own time (``agent.judging.Judged.play_s``). A DPO step of N pairs costs about two SFT steps of N
rows (each pair's chosen and rejected reply after one prompt), and its reference pass before step 1 a third of a DPO
step per N pairs (forwards only): ``dpo_steps``. Under the recipe's run directory: ``episodes/rl-tasks-start/`` (the start's
episodes), ``filtered_bc/``, ``dpo/`` (``labels/``, ``pairs.jsonl`` trained), ``dagger/`` and ``dagger_dpo/`` (the
rounds as ``dagger`` lays them out; dagger_dpo's ``pairs.jsonl``); every training run beside the recipe's run.

A baseline that cannot train (nothing to clone, no pairs, no time left) is reported as not trained, saying why. Each
trained one is then judged with the recipe's model and the start on the same episodes (``bench.recipes``), and a
paired count against the start says which tasks each won or lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..dagger import TimeBudget
from ..user_output import table_cell, text_table

LABELS = {
    "base": "SFT start",
    "sft_continued": "SFT continued",
    "filtered_bc": "filtered BC",
    "dagger": "DAgger",
    "dpo": "DPO",
    "dagger_dpo": "DAgger + DPO",
    "tuned": "RL (the recipe)",
}


@dataclass
class Baseline:
    role: str  # one of config.recipes.BASELINES
    run_dir: Path | None  # None: not trained (say why in note)
    train_s: float = 0.0
    steps: int = 0
    note: str = ""


@dataclass
class Comparison:
    """One evaluation's models side by side: per role its success (of n), its loop and false-finish rates
    (``agent.metrics``) and, against the start, the tasks only it finished, only the start finished, and the sign
    test's p."""

    label: str
    rows: list[dict] = field(
        default_factory=list
    )  # {role, success, n, only, only_start, p, loop_rate, false_finish_rate}


def fastest_step_s(run_dir: Path) -> float:
    """The wall time of a run's fastest optimizer step (its step events): the machine's speed for that training,
    which other jobs on the machine can only slow."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    times = [e.step_time_s for e in iter_events(run_dir / EVENTS_FILE) if getattr(e, "type", None) == "step"]
    if not times:
        raise RuntimeError(f"{run_dir} logged no step: the baselines need the start run's step time")
    return min(times)


def run_overhead_s(run_dir: Path) -> float:
    """What a training run of the start recipe costs besides its steps, as the start run took it: the time from its
    first event to its last that no step took (the model's building, the rows' tokenizing, the saving)."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    events = [e for e in iter_events(run_dir / EVENTS_FILE) if e.rank == 0]
    steps = sum(e.step_time_s for e in events if getattr(e, "type", None) == "step")
    return max(0.0, events[-1].time - events[0].time - steps) if events else 0.0


@dataclass
class StartPoint:
    """What every baseline of one recipe's run trains from and within: the start recipe and model, the wall time,
    the start run's fastest step, the recipe's run directory (``run_dir``: the baselines' files in it, their runs
    beside it), ``train(cfg) -> run_dir``; and the start's episodes of the RL tasks, played once."""

    recipe: object
    start: object
    start_model: Path
    wall_s: float
    run_dir: Path
    train: Callable
    progress: bool
    step_s: float
    stamp: str
    run_s: float = 0.0  # a training run's cost besides its steps: the start run's, then the last SFT run's here
    played: object = None  # agent.judging.Judged: the start's episodes of the RL tasks, once played
    play_s: float = 0.0  # what playing them took

    @property
    def common(self) -> dict:
        return {
            "model.source": str(self.start_model),
            "output.runs_dir": str(self.run_dir.parent),
            "output.progress_bar": self.progress,
        }

    def config(self, role: str, overrides: dict):
        """The start recipe's configuration for ``role``'s training run (beside the recipe's run)."""
        name = f"{self.recipe.name}-{role.replace('_', '-')}-{self.stamp}"
        return self.start.run_config({**self.common, **overrides, "output.run_name": name})

    @cached_property
    def rl(self):
        """The RL section the recipe's run trained with (its saved configuration: ``--set`` included)."""
        from ..runs.layout import run_config

        return run_config(self.run_dir).rl

    @cached_property
    def tasks(self) -> list:
        from ..rewards.phone_tasks import rl_tasks

        return rl_tasks(self.rl)

    @cached_property
    def play(self) -> dict:
        """How the RL tasks are played (``dagger.play_and_label``'s settings), as the run's rollouts played them."""
        from ..rewards.phone_tasks import episode_settings

        return episode_settings(self.rl)

    def budget(self) -> TimeBudget:
        """A baseline's share of the wall time, from now."""
        return TimeBudget(self.wall_s, self.step_s, run_s=self.run_s, clock=time.monotonic)

    def train_sft(self, cfg, budget: TimeBudget | None = None) -> Path:
        """``train(cfg)`` for a run of the start recipe's method, its cost besides its steps kept (``run_s``, and
        ``budget``'s) for the runs still to plan."""
        t0 = time.monotonic()
        trained = self.train(cfg)
        self.run_s = max(0.0, time.monotonic() - t0 - cfg.schedule.max_steps * self.step_s)
        if budget is not None:
            budget.run_s = self.run_s
        return trained

    def start_play(self, budget: TimeBudget):
        """The start's judged episodes of the RL tasks (played on the first call, then read), their playing charged
        to ``budget`` whether played or read here."""
        t0 = time.monotonic()
        if self.played is None:
            self.played = _play_rl_tasks(self)
            copied = self.played.replayed_from is not None and self.played.play_s is not None
            self.play_s = self.played.play_s if copied else time.monotonic() - t0  # a copy: the playing it copies
        budget.owed_s += max(0.0, self.play_s - (time.monotonic() - t0))
        budget.play_s = self.play_s
        return self.played


def train_baselines(
    recipe, start, start_run: Path, start_model: Path, wall_s: float, run_dir: Path, train, progress: bool
) -> list[Baseline]:
    """``recipe``'s baselines, each trained from ``start_model`` by its ``start`` recipe for ``wall_s`` (the recipe's
    own training time) with ``train(cfg) -> run_dir`` beside ``run_dir`` (the recipe's run, which keeps the
    baselines' episodes, labels and rows); ``start_run``: the run that trained the start (its fastest step)."""
    at = StartPoint(
        recipe,
        start,
        Path(start_model),
        wall_s,
        Path(run_dir),
        train,
        progress,
        fastest_step_s(start_run),
        time.strftime("%Y%m%d-%H%M%S"),
        run_overhead_s(start_run),
    )
    return [TRAINERS[role](at) for role in recipe.baselines]


def _announce(at: StartPoint, role: str, what: str) -> None:
    print(
        f"[recipes] {at.recipe.name}: baseline {LABELS[role]}, {what} from its model ({at.wall_s:.0f} s at "
        f"{at.step_s:.1f} s a step)",
        flush=True,
    )


def _sft_continued(at: StartPoint) -> Baseline:
    budget, steps = at.budget(), max(1, round((at.wall_s - at.run_s) / at.step_s))
    _announce(at, "sft_continued", f"{steps} steps of {at.start.name}")
    trained = at.train_sft(at.config("sft_continued", {"schedule.max_steps": steps}))
    return Baseline("sft_continued", trained, budget.spent(), steps)


def _filtered_bc(at: StartPoint) -> Baseline:
    budget = at.budget()
    rows, note = own_successes(at, budget)
    if rows is None:
        return Baseline("filtered_bc", None, budget.spent(), note=note)
    steps = round((budget.left() - at.run_s) / at.step_s)
    if steps < 1:  # one step with no warmup only perturbs it (2026-12-06: 1 of 24 tasks)
        note += f"; playing them took {budget.spent():.0f} s of the {at.wall_s:.0f} s: no time left to train"
        return Baseline("filtered_bc", None, budget.spent(), note=note)
    _announce(at, "filtered_bc", f"{steps} steps of {at.start.name} ({note})")
    trained = at.train_sft(at.config("filtered_bc", {"data.train": str(rows), "schedule.max_steps": steps}))
    return Baseline("filtered_bc", trained, budget.spent(), steps, note)


def _play_rl_tasks(at: StartPoint):
    """The start model's greedy episodes of the recipe's RL tasks through the one judge, in
    RUN/episodes/rl-tasks-start/ (copied, not played, where a run beside holds them under the same replay key)."""
    from ..agent import Contestant, judge, sim_devices
    from ..agent.judging import in_process
    from ..agent.store import replay_key, replay_numerics
    from ..hardware import resolve_device
    from ..models import load_for_inference
    from ..runs.layout import EPISODES_DIR

    rl, tasks, play = at.rl, at.tasks, at.play
    device = resolve_device("auto")
    settings = {
        "tasks": rl.tasks,
        "n": len(tasks),
        "observation": rl.observation,
        "max_steps": rl.episode_max_steps,
        "max_tokens": rl.max_new_tokens,
        "date": rl.date,
    }
    key = replay_key(at.start_model, settings, [repr(t) for t in tasks], replay_numerics(device))
    contestant = Contestant(
        "start",
        at.run_dir / EPISODES_DIR / "rl-tasks-start",
        in_process("start", lambda: load_for_inference(str(at.start_model), device=device), rl.max_new_tokens),
        model=str(at.start_model),
        replay_key=key,
    )
    [played] = judge(
        [contestant],
        tasks,
        sim_devices(play["size"]),
        settings,
        replays=at.run_dir.parent,
        progress=at.progress,
        max_steps=play["max_steps"],
        observation=play["observation"],
        date=play["date"],
    )
    return played


def own_successes(at: StartPoint, budget: TimeBudget) -> tuple[Path | None, str]:
    """The start model's successful episodes of the recipe's RL tasks as training rows (a JSONL in the recipe's run),
    and a note saying how many; (None, why) when none succeeded."""
    from ..agent.record import record_rows

    played = at.start_play(budget)
    won, n = sum(bool(e.success) for e in played.episodes), len(played.episodes)
    if not won:
        return None, f"the start finished none of the {n} RL tasks: nothing to clone"
    recorded = record_rows(played.episodes, at.run_dir / "filtered_bc" / "train.jsonl", observation=at.rl.observation)
    return Path(recorded.path), f"{recorded.rows} rows of the {won} of {n} RL tasks the start finished"


def _run_dagger(at: StartPoint, role: str, budget: TimeBudget, played) -> list:
    """DAgger's rounds from the start within ``budget`` into RUN/<role>/ (``dagger.dagger_rounds``), round 1
    labelling the start's episodes ``played``."""
    from ..dagger import dagger_rounds

    settings = at.recipe.baseline_settings
    rounds = settings.dagger_rounds
    within = "" if budget.wall_s == at.wall_s else f" within {budget.wall_s:.0f} s of them"
    _announce(at, role, f"at most {rounds} DAgger rounds on {len(at.tasks)} RL tasks{within}")
    return dagger_rounds(
        at.start.run_config(at.common),
        at.start_model,
        at.tasks,
        rounds,
        budget,
        lambda cfg: (at.train_sft(cfg, budget), "finished"),
        at.run_dir / role,
        progress=at.progress,
        first_played=played,
        label_share=settings.dagger_label_share,
        **at.play,
    )


def _rounds_note(rounds: list) -> str:
    labelled = sum(r.event.states for r in rounds)
    kinds = {k: sum(r.event.kinds.get(k, 0) for r in rounds) for k in rounds[0].event.kinds}
    return (
        f"{len(rounds)} DAgger round(s) of {' + '.join(str(r.steps) for r in rounds)} steps, {labelled} states "
        f"labelled ({_kinds_text(kinds)}){_left_out_text(sum(r.left_out for r in rounds))}"
    )


def _left_out_text(n: int) -> str:
    return f", {n} left out (not in the runtime format)" if n else ""


def _kinds_text(kinds: dict) -> str:
    """How many states left a shortest path, by kind: ``loop 2, false_finish 1, other 5`` (or ``none off a path``)."""
    return ", ".join(f"{k} {n}" for k, n in kinds.items() if n) or "none off a shortest path"


def _dagger(at: StartPoint) -> Baseline:
    budget = at.budget()
    rounds = _run_dagger(at, "dagger", budget, at.start_play(budget))
    if not rounds:
        why = f"playing the RL tasks took {budget.spent():.0f} s of the {at.wall_s:.0f} s: no time left to train"
        return Baseline("dagger", None, budget.spent(), note=why)
    return Baseline("dagger", rounds[-1].run_dir, budget.spent(), sum(r.steps for r in rounds), _rounds_note(rounds))


def _dpo(at: StartPoint) -> Baseline:
    from ..agent import ExpertPolicy
    from ..agent.labels import write_labels

    budget = at.budget()
    played = at.start_play(budget)
    labelled = write_labels(played.episodes, ExpertPolicy(at.tasks), at.run_dir / "dpo" / "labels", played.folder)
    note = (
        f"the start's {len(played.episodes)} RL episodes: {labelled.states} states, {_kinds_text(labelled.kinds)}"
        f"{_left_out_text(labelled.left_out)}"
    )
    trained, steps, note = _train_dpo(at, "dpo", at.start_model, [labelled.pairs], budget, note)
    return Baseline("dpo", trained, budget.spent(), steps, note)


def _dagger_dpo(at: StartPoint) -> Baseline:
    from ..runs.layout import whole_model

    budget = at.budget()
    played = at.start_play(budget)
    budget.wall_s = (at.wall_s + at.play_s) / 2  # DAgger's part: the start's playing and half of the rest
    rounds = _run_dagger(at, "dagger_dpo", budget, played)
    if not rounds:
        why = f"playing the RL tasks took {budget.spent():.0f} s of DAgger's {budget.wall_s:.0f} s: no time to train"
        return Baseline("dagger_dpo", None, budget.spent(), note=why)
    budget.wall_s = at.wall_s  # DPO: what is left of the whole
    sources = [r.pairs for r in rounds]
    model = whole_model(rounds[-1].run_dir)
    trained, steps, note = _train_dpo(at, "dagger_dpo", model, sources, budget, _rounds_note(rounds))
    return Baseline("dagger_dpo", trained, budget.spent(), sum(r.steps for r in rounds) + steps, note)


def _train_dpo(at: StartPoint, role: str, model: Path, sources: list, budget: TimeBudget, note: str) -> tuple:
    """DPO from ``model`` on the pairs of ``sources`` for what ``budget`` has left: (its run or None, its steps, the
    note with what it trained on or why it did not)."""
    from ..config.files import read_jsonl

    pairs = sum(len(read_jsonl(p)) for p in sources)
    if not pairs:
        return None, 0, f"{note}: no pairs (no step left a shortest path): nothing for DPO to prefer"
    cfg = at.start.run_config(at.common)
    per_step = cfg.schedule.micro_batch_size * cfg.schedule.grad_accum_steps * _ranks(cfg)
    steps = dpo_steps(budget.left() - at.run_s, at.step_s, pairs, per_step)
    if steps < 1:
        return (
            None,
            0,
            f"{note}; {pairs} pairs, and {budget.spent():.0f} s of the {at.wall_s:.0f} s spent: no time left",
        )
    kept = select_pairs(sources, at.run_dir / role / "pairs.jsonl", steps * per_step)
    note = f"{note}; DPO for {steps} steps on {kept} of {pairs} pairs (loops, then false finishes first)"
    _announce(at, role, note)
    overrides = {
        "model.source": str(model),
        "training.method": "dpo",
        "data.train": str(at.run_dir / role / "pairs.jsonl"),
        "data.ui_tree_layouts": "as_recorded",  # dpo trains pairs as recorded
        "schedule.learning_rate": at.recipe.baseline_settings.dpo_learning_rate,
        "schedule.max_steps": steps,
    }
    return at.train(at.config(role, overrides)), steps, note


def _ranks(cfg) -> int:
    return cfg.sharding.world_size if cfg.sharding.distributed else 1


def dpo_steps(seconds: float, step_s: float, pairs: int, per_step: int) -> int:
    """DPO steps of ``per_step`` pairs that ``seconds`` hold, at ``step_s`` an SFT step of ``per_step`` rows: a DPO
    step forwards and backwards twice the sequences (each pair's chosen and rejected reply after its prompt), and the
    reference pass before step 1 forwards each pair's two once (a forward is about a third of a forward and backward)."""
    reference_s = 2 * pairs * step_s / (3 * per_step)
    return max(0, int((seconds - reference_s) // (2 * step_s)))


def select_pairs(sources: list, out: Path, most: int) -> int:
    """The preference pairs of ``sources`` (``pairs.jsonl`` files) into ``out``, the loops first, then the false
    finishes, then the rest (``agent.labels.KINDS``), at most ``most`` (what the DPO steps see once); image paths
    rewritten for ``out``'s folder. How many were written."""
    import json

    from ..agent.labels import KINDS
    from ..config.files import read_jsonl
    from ..data.merge import moved_row

    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [moved_row(r, Path(src).parent, out.parent) for src in sources for r in read_jsonl(src)]
    rows.sort(key=lambda r: KINDS.index(r["meta"]["kind"]))  # stable: each kind in its episodes' order
    with open(out, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:most])
    return min(len(rows), most)


TRAINERS = {
    "sft_continued": _sft_continued,
    "filtered_bc": _filtered_bc,
    "dagger": _dagger,
    "dpo": _dpo,
    "dagger_dpo": _dagger_dpo,
}


def comparison_lines(recipe_name: str, comparisons: list[Comparison], baselines: list[Baseline]) -> list[str]:
    """One table: a row per model, per evaluation its success with the paired count against the start, and its loop
    and false-finish rates on those episodes; then how each baseline trained, or why it did not."""
    if not comparisons:
        return []
    roles = [r["role"] for r in comparisons[0].rows]
    header = ["model"]
    for c in comparisons:
        header += [f"{c.label}: success, only it / only start (sign p)", "loops", "false finishes"]
    table = [header]
    for role in roles:
        cells = [LABELS.get(role, role)]
        for c in comparisons:
            r = next(x for x in c.rows if x["role"] == role)
            paired = "-" if role == "base" else f"{r['only']} / {r['only_start']} (p {r['p']:.2g})"
            cells += [
                f"{r['success']}/{r['n']}  {paired}",
                table_cell(r["loop_rate"]),
                table_cell(r["false_finish_rate"]),
            ]
        table.append(cells)
    lines = [f"{recipe_name}: the same start, the same episodes, the same wall time"]
    lines += text_table(table, indent="  ")
    lines += [
        f"  {LABELS[b.role]}: {b.steps} steps in {b.train_s:.0f} s" + (f"; {b.note}" if b.note else "")
        if b.run_dir is not None
        else f"  {LABELS[b.role]}: not trained ({b.note})"
        for b in baselines
    ]
    return lines
