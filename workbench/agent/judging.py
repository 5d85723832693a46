"""The one judge of phone-agent episodes: each contestant plays the tasks to their end, its episodes stored in its
own folder as they end (``agent.store``), summarised (``agent.metrics.summarize_episodes``), and contestants compared task
by task (``paired_with``).

Every caller that judges episodes goes through ``judge``: ``workbench agent run`` (``agent.evaluate``: served models
or the oracle), the recipe bench (``bench.recipes``: a run's model, its start and the baselines beside it, in this
process) and whoever else compares agents. A contestant is a name, a folder and a policy made only when it must
play (loading a model costs); one with a replay key (``agent.store.replay_key``: the weights, the settings, the
tasks, the code and the numerics, as one hash) whose episodes some folder of ``replays`` already holds under the same
name and key has them copied instead of played again: greedy episodes repeat exactly, so runs that start from one
model judge it once.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .episode import Episode
from .metrics import paired, summarize_episodes
from .policy import Policy
from .runner import run_episodes
from .store import REPLAY_KEY, SUMMARY_FILE, EpisodeWriter, find_replay, read_episodes

PLAY_S = "play_s"  # the summary's key for the playing's wall time


@dataclass
class Contestant:
    """One agent to judge: ``policy()`` makes its policy (called only when it must play; closed after, when it has
    ``close``); its episodes go to ``folder``; ``model`` is what the folder's summary names (default: ``name``)."""

    name: str
    folder: Path
    policy: Callable[[], Policy]
    model: str | None = None
    replay_key: str | None = None


@dataclass
class Judged:
    """A contestant's episodes (in the tasks' order), their metrics, and the folder it copied them from, if any."""

    name: str
    folder: Path
    episodes: list[Episode]
    metrics: dict
    replayed_from: Path | None = None
    records: list[dict] = field(default_factory=list)  # one line per episode: task, success, end_reason, steps
    play_s: float | None = None  # the playing's wall time, where it was played (None: copied from a folder without it)

    def paired_with(self, other: Judged) -> dict:
        """This contestant (a) against ``other`` (b), task by task (``agent.metrics.paired``)."""
        return paired(self.episodes, other.episodes)


def judge(
    contestants: Sequence[Contestant],
    tasks: Sequence,
    devices,
    settings: dict,
    *,
    replays: Path | None = None,
    progress: bool = True,
    screens: bool = True,
    on_judged: Callable[[Judged], None] | None = None,
    **run_options,
) -> list[Judged]:
    """Each contestant's episodes of ``tasks`` on phones from ``devices`` (``run_episodes`` with ``run_options``),
    stored in its folder with a summary naming it beside ``settings`` and its metrics. A contestant with a replay
    key whose episodes a folder of the same name under ``replays`` (``RUNS/*/episodes/NAME``) holds with the same
    key copies them instead of playing. ``on_judged`` is called as each contestant is done."""
    out = []
    for c in contestants:
        earlier = find_replay(replays, c.folder.name, c.replay_key) if replays is not None and c.replay_key else None
        if earlier is not None:
            if earlier.resolve() != c.folder.resolve():
                shutil.rmtree(c.folder, ignore_errors=True)
                shutil.copytree(earlier, c.folder)
            episodes = read_episodes(c.folder)
            summary = json.loads((c.folder / SUMMARY_FILE).read_text(encoding="utf-8"))
            metrics, play_s = summary["metrics"], summary.get(PLAY_S)
        else:
            t0 = time.monotonic()
            policy = c.policy()
            try:
                episodes, metrics = play_to_folder(
                    policy,
                    tasks,
                    devices,
                    c.folder,
                    settings,
                    screens=screens,
                    progress=progress,
                    model=c.model or c.name,
                    replay_key=c.replay_key,
                    started=t0,
                    **run_options,
                )
            finally:
                getattr(policy, "close", lambda: None)()
                del policy  # a model in this process: freed before the next one loads
            play_s = time.monotonic() - t0
        judged = Judged(
            c.name,
            c.folder,
            episodes,
            metrics,
            earlier,
            [
                {
                    "task": e.task,
                    "success": e.success,
                    "end_reason": e.end_reason,
                    "steps": len(e.steps),
                    "message": e.message,
                }
                for e in episodes
            ],
            play_s,
        )
        if on_judged is not None:
            on_judged(judged)
        out.append(judged)
    return out


def play_to_folder(
    policy,
    tasks: Sequence,
    devices,
    folder: Path,
    settings: dict,
    *,
    screens: bool = True,
    progress: bool = True,
    model: str | None = None,
    replay_key: str | None = None,
    started: float | None = None,
    **run_options,
) -> tuple[list, dict]:
    """(episodes, metrics) of one policy (``run_episodes`` with ``run_options``), each episode written to ``folder``
    as it ends, with a progress bar counting the successes; the folder's summary names ``model`` (default: the
    policy's name) beside ``settings`` and the metrics, the playing's wall time (``play_s``, from ``started``: the
    ``time.monotonic()`` its policy's making began, default now; what a copy of the episodes does not spend again),
    and ``replay_key`` where given."""
    t0 = time.monotonic() if started is None else started
    writer = EpisodeWriter(folder, screens=screens)
    bar = _progress(len(tasks), f"agent {policy.name}", progress)
    successes = []

    def ended(episode):
        writer.write(episode)
        successes.append(bool(episode.success))
        bar.update(1)
        bar.set_postfix(succeeded=f"{sum(successes)}/{len(successes)}")

    try:
        episodes = run_episodes(tasks, policy, devices, on_episode=ended, **run_options)
    finally:
        bar.close()
    metrics = summarize_episodes(episodes)
    writer.close(
        {
            "model": model or policy.name,
            "settings": settings,
            "metrics": metrics,
            PLAY_S: round(time.monotonic() - t0, 3),
            **({REPLAY_KEY: replay_key} if replay_key else {}),
        }
    )
    return episodes, metrics


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="episode", disable=not enabled, leave=False)


def in_process(name: str, load: Callable[[], object], max_tokens: int) -> Callable[[], Policy]:
    """A contestant's policy factory for a model in this process: ``load()`` gives a ``models.LoadedModel`` (called
    only when the contestant plays), answered greedily by ``agent.InProcessPolicy``."""

    def make() -> Policy:
        from .policy import InProcessPolicy

        loaded = load()
        return InProcessPolicy(loaded.model, loaded.tokenizer, loaded.processor, name=name, max_tokens=max_tokens)

    return make
