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
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .agent import Contestant, ExpertPolicy, judge, sim_devices
from .agent.judging import in_process
from .agent.labels import write_labels
from .config import ConfigError, RunConfig, replace
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
    labels: Path
    pairs: Path
    train: Path
    event: DaggerRound


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
):
    """Round ``n``'s playing (``model``, greedy; ``policy``: another policy to play instead, for tests) and the
    expert's labels of every state it was asked at; (the judged episodes, what ``write_labels`` wrote)."""
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
    return played, write_labels(played.episodes, expert, round_dir / "labels")


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
    cfg = run_config(run_dir)
    dagger_dir = Path(run_dir) / DAGGER_DIR
    if (dagger_dir / EVENTS_FILE).exists():
        raise ConfigError([("--run", f"{dagger_dir} holds an earlier DAgger already: move it away to start again")])
    model, expert, labels, out = start_model(Path(run_dir)), ExpertPolicy(tasks), [], []
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
                observation=observation,
                max_steps=max_steps,
                max_tokens=max_tokens,
                size=size,
                date=date,
                expert=expert,
                progress=progress,
                policy=policy_for(model) if policy_for else None,
            )
            labels.append(labelled.labels)
            merged = merge_files(round_dir / "train.jsonl", [cfg.data.train, *labels])
            if merged.problems:
                raise ValueError(f"round {n}: the rows to train on have problems: {merged.problems[:3]}")
            trained, status = train(round_config(cfg, model, Path(merged.path), steps, dagger_dir, n, progress))
            m = played.metrics
            event = DaggerRound(
                round=n,
                model=str(model),
                episodes=m["n"],
                success_rate=m["success_rate"],
                loop_rate=m["loop_rate"],
                false_finish_rate=m["false_finish_rate"],
                states=labelled.states,
                kinds=labelled.kinds,
                rows=merged.rows,
                run_dir=str(trained),
                status=status,
                wall_s=round(time.monotonic() - t0, 1),
            )
            writer.emit(event)
            out.append(RoundResult(n, Path(trained), status, labelled.labels, labelled.pairs, Path(merged.path), event))
            if status != "finished":
                break
            model = start_model(Path(trained))
    finally:
        writer.close()
    return out
