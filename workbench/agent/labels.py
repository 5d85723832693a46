"""An agent's own states labelled by the expert: DAgger's training rows, and the preference pairs at the states where
the agent's step left a shortest path.

Every state an agent was asked at in its episodes (``record.asked_states``: the conversation as it saw it, its own
earlier replies in it) gets the expert's answer there (``policy.ExpertPolicy``: the phone rebuilt by replaying the
conversation, the next step of a shortest path to the task's checks). Its ``kind`` says whether, and how, the
agent's own step there left a shortest path:

- ``None``: it did not (its action cut the expert's remaining steps by one, or it finished where every check held);
- ``loop``: the same action on the same screen as its step before (the repeat a stuck agent makes);
- ``false_finish``: finish while a check of the task fails;
- ``other``: any other step off a shortest path (a detour, an action that did nothing, a reply the runtime could not
  parse).

``dagger_rows``: one training row a state, the expert's reply the target (``meta.label`` ``expert``, ``meta.kind``,
``meta.agent_action``), in Open-AutoGLM's runtime format as ``agent record``'s rows (``workbench data check`` holds them
to it). ``preference_rows``: one pair a state whose ``kind`` is not None, in TRL's conversational preference format
plus the workbench's ``meta``::

    {"prompt": [system, user, assistant (weight 0), ..., user], "chosen": [{"role": "assistant", "content": EXPERT}],
     "rejected": [{"role": "assistant", "content": AGENT}], "meta": {"format": "open-autoglm", "kind": "loop", ...}}

``prompt`` is the conversation the agent saw (its screenshot a file in ``images/`` beside the JSONL, as in training
rows), ``chosen`` the expert's reply and ``rejected`` the agent's, each written as a model writes a reply
(``<think>..</think>\\n<answer>..``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..phone.actions import POINT_ACTIONS
from ..phone.conversation import runtime_problems
from ..phone.expert import ExpertStep
from .episode import Episode, Turn
from .policy import ExpertPolicy
from .record import ImageFolder, _png_of, asked_states, row_meta

KINDS = ("loop", "false_finish", "other")  # how an agent's step left a shortest path (None: it did not)


@dataclass
class LabelledState:
    """One state an agent was asked at, with its own reply and the expert's answer there."""

    episode: Episode
    number: int  # the episode's number among those labelled (1-based): rows' meta.episode
    step: Turn
    messages: list[dict]  # the conversation as the agent saw it, in training rows' form
    agent_reply: str  # the agent's reply as a training target
    expert: ExpertStep
    expert_reply: str
    expert_box: list[int] | None  # the box of the element the expert's tap hits (meta.target_box)
    kind: str | None  # None, or one of KINDS


def label_states(
    episodes: Iterable[Episode], policy: ExpertPolicy, image_path, screens: Path | None = None
) -> Iterator[LabelledState]:
    """Every state the agent was asked at in ``episodes`` (a reply it could not parse included; a failed request
    not), labelled by ``policy``'s expert. ``image_path`` stores a screenshot and gives the path a row names
    (``ImageFolder.path``); ``screens``: the folder episodes read back from disk were stored in."""
    for number, episode in enumerate(episodes, start=1):
        before = None
        for step, messages, agent_reply in asked_states(episode, image_path, screens, unparsed=True):
            task, phone = policy.phone(messages)
            if task is None:
                raise ValueError(f"episode {episode.task!r}: the expert knows no task reading {episode.instruction!r}")
            expert = policy.expert.step(task, phone)
            reply = policy.reply(messages, expert).content
            box = None
            if expert.action.type in POINT_ACTIONS:
                hit = phone.screen().hit(tuple(expert.action.args["element"]))
                box = list(phone.screen().elements[hit]) if hit else None
            screen = _screen(step, screens)
            kind = _kind(policy, messages, agent_reply, step, expert, before, screen)
            before = (step.action, screen)
            yield LabelledState(episode, number, step, messages, agent_reply, expert, reply, box, kind)


def _screen(step: Turn, screens: Path | None) -> str:
    return hashlib.sha1(_png_of(step, screens)).hexdigest()


def _kind(
    policy: ExpertPolicy,
    messages: list[dict],
    agent_reply: str,
    step: Turn,
    expert: ExpertStep,
    before: tuple | None,
    screen: str,
) -> str | None:
    """How the agent's step left a shortest path (None: it did not)."""
    finished = step.parse_error is None and (step.action or "").startswith("finish(")
    if finished:
        return None if expert.action.type == "finish" else "false_finish"
    if step.parse_error is None and step.action is not None:
        after = policy.step(messages + [{"role": "assistant", "content": agent_reply}])
        if after.steps_left == expert.steps_left - 1 and after.solves == expert.solves:
            return None
    if before is not None and step.action is not None and before == (step.action, screen):
        return "loop"
    return "other"


def dagger_rows(states: Iterable[LabelledState]) -> list[dict]:
    """One training row a state: the conversation the agent saw, the expert's reply the target."""
    rows = []
    for s in states:
        meta = row_meta(
            s.episode, s.number, s.step, len(s.episode.steps), s.expert_box, s.episode.observation, s.episode.lang
        )
        meta.update({"label": "expert", "kind": s.kind, "agent_action": s.step.action})
        rows.append(
            {"messages": s.messages + [{"role": "assistant", "content": s.expert_reply, "weight": 1}], "meta": meta}
        )
    return rows


def preference_rows(states: Iterable[LabelledState]) -> list[dict]:
    """One preference pair a state where the agent left a shortest path: the expert's reply chosen, the agent's
    rejected (TRL's conversational preference format, ``meta`` beside it)."""
    rows = []
    for s in states:
        if s.kind is None:
            continue
        meta = row_meta(
            s.episode, s.number, s.step, len(s.episode.steps), s.expert_box, s.episode.observation, s.episode.lang
        )
        meta.update({"kind": s.kind, "agent_action": s.step.action})
        rows.append(
            {
                "prompt": s.messages,
                "chosen": [{"role": "assistant", "content": s.expert_reply}],
                "rejected": [{"role": "assistant", "content": s.agent_reply}],
                "meta": meta,
            }
        )
    return rows


@dataclass
class Labelled:
    """What ``write_labels`` wrote: the DAgger rows (``labels``), the pairs, and the states by kind; ``left_out``:
    the states whose conversation is not in the runtime format the rows are held to."""

    labels: Path
    pairs: Path
    states: int
    kinds: dict  # {kind: states of it}, None's aside
    left_out: int = 0


def write_labels(
    episodes: Iterable[Episode], policy: ExpertPolicy, folder: Path, screens: Path | None = None
) -> Labelled:
    """``episodes``' states labelled by the expert into ``folder``: ``labels.jsonl`` (DAgger's rows) and
    ``pairs.jsonl`` (the preference pairs), their screenshots in ``images/`` beside them. A state whose conversation
    ``workbench data check`` refuses as the runtime format (an earlier reply the runtime went on from, such as an
    action it does not know, that the action grammar does not hold) is left out of both and counted: its row could
    join no training file."""
    folder.mkdir(parents=True, exist_ok=True)
    images = ImageFolder(folder / "labels.jsonl")
    labelled = list(label_states(episodes, policy, images.path, screens))
    fits = [not runtime_problems(r["messages"], r["meta"].get("observation")) for r in dagger_rows(labelled)]
    states = [s for s, fit in zip(labelled, fits) if fit]
    out = Labelled(
        folder / "labels.jsonl",
        folder / "pairs.jsonl",
        len(states),
        {k: sum(s.kind == k for s in states) for k in KINDS},
        len(labelled) - len(states),
    )
    for path, rows in ((out.labels, dagger_rows(states)), (out.pairs, preference_rows(states))):
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return out
