"""DAgger over a run (``workbench agent dagger``): the agent learns from the states its own mistakes lead it to.

Each round: the agent (the run's model in round 1, the previous round's after) plays the tasks greedily through the
one judge of episodes (``agent.judging``); the expert labels every state it was asked at (``agent.labels``: the
conversation as the agent saw it, the expert's next step of a shortest path there); the labels join the rows the run
trained on and every earlier round's labels (``data.merge``: DAgger's aggregated data set); and the model trains on
them for ``steps`` optimizer steps from where the last round left it, with the run's own settings otherwise. Under
``RUN/dagger/``::

    events.jsonl             one ``dagger_round`` event a round (``events.schema.DaggerRound``), for the monitor
    round-N/                 round N's training run (config.json, events.jsonl, model/ or merged/), and beside it:
      episodes/played/       the episodes the agent played in round N (``agent.store``'s folder)
      labels/labels.jsonl    the expert's rows at the states it was asked at (images/ beside them)
      labels/pairs.jsonl     the preference pairs among them (where its step left a shortest path)
      train.jsonl            what round N trained on: the run's rows and every round's labels so far

A round starts from a whole model: a full fine-tune's model/, or a LoRA run's merged/ (``checkpointing.merge_adapter``,
which the rounds set for themselves).

``dagger_rounds`` is the loop itself, from any configuration and model into any folder: ``run_dagger`` runs it over a
run (into RUN/dagger/), and the recipe bench's DAgger baselines (``bench.baselines``) run it within a wall time
(``TimeBudget``: each round's steps from what its playing left), round 1 labelling episodes the start model played
once for every baseline (``first_played``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .agent import Contestant, ExpertPolicy, judge, sim_devices
from .agent.judging import in_process
from .agent.labels import write_labels
from .config import ConfigError, RunConfig, replace
from .config.files import jsonl_lines
from .data.merge import merge_files
from .events.log import EventWriter
from .events.schema import DaggerRound
from .phone.conversation import MAX_STEPS
from .phone.tasks import PhoneTask
from .runs.layout import EPISODES_DIR, EVENTS_FILE, run_config, whole_model

DAGGER_DIR = "dagger"


@dataclass
class RoundResult:
    round: int
    run_dir: Path  # the round's training run
    status: str
    steps: int  # the optimizer steps it trained
    labels: Path
    pairs: Path
    train: Path
    event: DaggerRound
    left_out: int = 0  # states labelled but left out: their conversation is not in the runtime format


@dataclass
class TimeBudget:
    """A wall time that playing, labelling and training share (the recipe bench's baselines: each trains from the same
    start for the recipe's own training time). ``step_s``: one training step's seconds (the start run's fastest);
    ``play_s``: what one round's playing and labelling costs (the start's playing of the tasks); ``run_s``: what a
    training run costs besides its steps (its worker's start, the model's loading, the rows' tokenizing, the saving).
    ``owed_s``: seconds counted against the budget that were not spent under it (episodes played once for several
    baselines and read here: the playing counts against each)."""

    wall_s: float
    step_s: float
    play_s: float = 0.0
    run_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    owed_s: float = 0.0
    last: bool = False  # the round just planned takes all that was left: no further round is played
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spent(self) -> float:
        return self.clock() - self.started + self.owed_s

    def left(self) -> float:
        return self.wall_s - self.spent()

    def round_steps(self, n: int, rounds: int) -> int:
        """Round ``n``'s training steps (of at most ``rounds``), once its playing and labelling are done: what is
        left, less the playing of the rounds still to come, shared evenly among this round and them, each share
        less a run's own cost. A further round is played only when each round then still trains at least as long as
        a round plays and for a step at least (else that time is better spent training): with too little left for
        that, this round takes all of it and is the ``last``. 0: not one step is left (DAgger ends before this round
        trains)."""
        left = self.left()
        for remaining in range(max(1, rounds - n + 1), 0, -1):
            share = (left - (remaining - 1) * self.play_s) / remaining - self.run_s
            if remaining == 1 or share >= max(self.play_s, self.step_s):
                break
        self.last = remaining == 1
        return max(0, int(share // self.step_s))


def start_model(run_dir: Path) -> Path:
    """The whole model a round starts from (ConfigError naming the fix when the run saved none)."""
    model = whole_model(run_dir)
    if model is None:
        raise ConfigError(
            [
                (
                    "--run",
                    f"{run_dir} saved no whole model (model/, or merged/ of a LoRA run with "
                    "checkpointing.merge_adapter true) for the agent to play and DAgger to train on",
                )
            ]
        )
    return model


def round_config(
    cfg: RunConfig, model: Path, rows: Path, steps: int, dagger_dir: Path, n: int, progress: bool
) -> RunConfig:
    """The run's settings for round ``n``: from ``model``, on ``rows``, ``steps`` steps, into ``dagger_dir/round-n``."""
    warmup = cfg.schedule.warmup_steps
    return replace(
        cfg,
        **{
            "model.source": str(model),
            "data.train": str(rows),
            "schedule.max_steps": steps,
            "schedule.warmup_steps": None if warmup is None else min(warmup, steps),
            "output.runs_dir": str(dagger_dir),
            "output.run_name": f"round-{n}",
            "output.progress_bar": progress,
            "checkpointing.resume_from": None,
            "checkpointing.merge_adapter": cfg.lora.enabled,
        },
    )


def play_and_label(
    n: int,
    model: Path,
    tasks: Sequence[PhoneTask],
    round_dir: Path,
    *,
    observation: str,
    max_steps: int,
    max_tokens: int,
    size: tuple[int, int],
    date: datetime.date | None,
    expert: ExpertPolicy,
    progress: bool,
    policy=None,
    played=None,
):
    """Round ``n``'s playing (``model``, greedy; ``policy``: another policy to play instead, for tests) and the
    expert's labels of every state it was asked at; (the judged episodes, what ``write_labels`` wrote). ``played``:
    ``model``'s judged episodes of ``tasks``, played already (``agent.judging.Judged``): labelled, not played again."""
    if played is None:
        played = _play(n, model, tasks, round_dir, observation, max_steps, max_tokens, size, date, progress, policy)
    return played, write_labels(played.episodes, expert, round_dir / "labels", screens=played.folder)


def _play(n, model, tasks, round_dir, observation, max_steps, max_tokens, size, date, progress, policy):
    """Round ``n``'s agent (``model``, or ``policy``) playing ``tasks`` through the one judge."""
    from .hardware import resolve_device
    from .models import load_for_inference

    load = (
        (lambda: policy)
        if policy is not None
        else in_process(f"round-{n}", lambda: load_for_inference(str(model), device=resolve_device("auto")), max_tokens)
    )
    settings = {
        "round": n,
        "model": str(model),
        "n": len(tasks),
        "observation": observation,
        "max_steps": max_steps,
        "max_tokens": max_tokens,
    }
    [played] = judge(
        [Contestant(f"round-{n}", round_dir / EPISODES_DIR / "played", load, model=str(model))],
        tasks,
        sim_devices(size),
        settings,
        progress=progress,
        max_steps=max_steps,
        observation=observation,
        date=date,
    )
    return played


def run_dagger(
    run_dir: Path,
    tasks: Sequence[PhoneTask],
    rounds: int,
    steps: int,
    train: Callable,
    *,
    observation: str = "screenshot",
    max_steps: int = MAX_STEPS,
    max_tokens: int = 256,
    size: tuple[int, int] = (1080, 2400),
    date: datetime.date | None = None,
    progress: bool = True,
    policy_for: Callable[[Path], object] | None = None,
) -> list[RoundResult]:
    """``rounds`` rounds of DAgger from the run at ``run_dir`` on ``tasks`` (see the module's docstring), each
    training ``steps`` steps with ``train(cfg) -> (run_dir, status)`` (``training.train_to_end``: a worker process).
    ``policy_for(model)``: a policy to play a round's model with instead of the model itself (tests)."""
    dagger_dir = Path(run_dir) / DAGGER_DIR
    if (dagger_dir / EVENTS_FILE).exists():
        raise ConfigError([("--run", f"{dagger_dir} holds an earlier DAgger already: move it away to start again")])
    return dagger_rounds(
        run_config(run_dir),
        start_model(Path(run_dir)),
        tasks,
        rounds,
        steps,
        train,
        dagger_dir,
        observation=observation,
        max_steps=max_steps,
        max_tokens=max_tokens,
        size=size,
        date=date,
        progress=progress,
        policy_for=policy_for,
    )


def dagger_rounds(
    cfg: RunConfig,
    model: Path,
    tasks: Sequence[PhoneTask],
    rounds: int,
    steps: int | TimeBudget,
    train: Callable,
    dagger_dir: Path,
    *,
    progress: bool = True,
    policy_for: Callable[[Path], object] | None = None,
    first_played=None,
    label_share: float | None = None,
    **play,
) -> list[RoundResult]:
    """DAgger's rounds from ``model`` with ``cfg``'s settings (its rows the first data set) into ``dagger_dir``:
    ``steps`` a round, or as a ``TimeBudget`` plans them (it may end DAgger before ``rounds``); ``first_played``:
    ``model``'s judged episodes of ``tasks``, played already, which round 1 labels instead of playing;
    ``label_share``: the labels repeated to about this share of the rows a round trains on (``label_repeats``;
    None: each once). ``play``: ``play_and_label``'s settings (observation, max_steps, max_tokens, size, date)."""
    expert, labels, states, out = ExpertPolicy(tasks), [], 0, []
    budget = steps if isinstance(steps, TimeBudget) else None
    own_rows = sum(1 for _ in jsonl_lines(cfg.data.train)) if label_share else 0
    dagger_dir.mkdir(parents=True, exist_ok=True)
    writer = EventWriter(dagger_dir / EVENTS_FILE)
    try:
        for n in range(1, rounds + 1):
            t0, round_dir = time.monotonic(), dagger_dir / f"round-{n}"
            played, labelled = play_and_label(
                n,
                model,
                tasks,
                round_dir,
                expert=expert,
                progress=progress,
                policy=policy_for(model) if policy_for else None,
                played=first_played if n == 1 else None,
                **play,
            )
            labels.append(labelled.labels)
            states += labelled.states
            n_steps = budget.round_steps(n, rounds) if budget else steps
            if n_steps < 1:
                break
            times = label_repeats(own_rows, states, label_share)
            merged = merge_files(round_dir / "train.jsonl", [cfg.data.train, *labels], {str(p): times for p in labels})
            if merged.problems:
                raise ValueError(f"round {n}: the rows to train on have problems: {merged.problems[:3]}")
            trained, status = train(round_config(cfg, model, Path(merged.path), n_steps, dagger_dir, n, progress))
            event = _round_event(
                n, model, played.metrics, labelled, merged.rows, trained, status, time.monotonic() - t0
            )
            writer.emit(event)
            out.append(
                RoundResult(
                    n,
                    Path(trained),
                    status,
                    n_steps,
                    labelled.labels,
                    labelled.pairs,
                    Path(merged.path),
                    event,
                    labelled.left_out,
                )
            )
            if status != "finished" or (budget and budget.last):
                break
            model = start_model(Path(trained))
    finally:
        writer.close()
    return out


def label_repeats(rows: int, labels: int, share: float | None) -> int:
    """How many times ``labels`` label rows are written beside the run's ``rows`` rows for them to make about
    ``share`` of the whole (None: once). A few dozen labels among thousands of rows are otherwise hardly drawn in a
    round of a few dozen steps, and DAgger would train what the run's own rows teach."""
    if share is None or not labels:
        return 1
    return max(1, round(share * rows / ((1 - share) * labels)))


def _round_event(n, model, metrics, labelled, rows, trained, status, wall_s) -> DaggerRound:
    return DaggerRound(
        round=n,
        model=str(model),
        episodes=metrics["n"],
        success_rate=metrics["success_rate"],
        loop_rate=metrics["loop_rate"],
        false_finish_rate=metrics["false_finish_rate"],
        states=labelled.states,
        kinds=labelled.kinds,
        rows=rows,
        run_dir=str(trained),
        status=status,
        wall_s=round(wall_s, 1),
    )
