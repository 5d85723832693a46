"""Trajectories into training data: each step of an episode becomes one training row in Open-AutoGLM's runtime
format (``workbench.phone.conversation``), exactly the conversation its runtime sends at that step plus the reply: the
system prompt, the earlier turns as text with the earlier replies as the runtime keeps them, the latest screenshot
(an image file beside the JSONL), and the reply to learn as AutoGLM-Phone writes it, ``<think>..</think>\n<answer>do(...)``. Earlier assistant turns carry ``"weight": 0`` and the step's own reply
``"weight": 1`` (OpenAI's fine-tuning convention): each step is a training target once, in its own row, and is
context in the rows after it.

Rows carry ``meta``: ``format`` ("open-autoglm", which ``workbench data check`` holds them to), ``lang``, the task,
template, split, episode and step, the app on screen and, for a Tap / Long Press / Double Tap that hit an element,
its box on the grid (``target_box``), and the observation mode unless it is the screenshot (``observation``). Screenshots are stored once per
distinct image (named by content hash); a ``ui_tree`` row has no image: the screen's tree is in its latest turn.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config.files import UnreadableFile, jsonl_lines
from ..phone.actions import POINT_ACTIONS, ActionSyntaxError, parse_action
from ..phone.conversation import FORMAT_NAME, Conversation, assistant_target
from .episode import Episode, Turn

IMAGES_DIR = "images"


@dataclass
class Recorded:
    rows: int
    episodes: int
    skipped_episodes: int  # not recorded: unsuccessful (unless all were asked for)
    images: int
    path: str


def _png_of(step: Turn, screens: Path | None) -> bytes:
    if step.png is not None:
        return step.png
    if screens is None or step.screenshot is None:
        raise ValueError(
            f"step {step.index} of {step.current_app!r} has no screenshot to record (was the run stored "
            "with --no-screens?)"
        )
    return (screens / step.screenshot).read_bytes()


def asked_states(
    episode: Episode,
    image_path,
    screens: Path | None = None,
    observation: str | None = None,
    lang: str | None = None,
    unparsed: bool = False,
) -> Iterator[tuple[Turn, list[dict], str]]:
    """Each step of ``episode`` whose request was answered, as (the step, the conversation the model saw there in
    training rows' form: a copy, its earlier replies ``"weight": 0`` as the runtime kept them (``Turn.content``), the
    screenshot stored by ``image_path``; its reply as a training target). ``unparsed``: the step whose reply the runtime could not parse too (the last of its
    episode); else it is left out. Arguments as ``episode_rows``."""
    observation, lang = observation or episode.observation, lang or episode.lang
    conversation = Conversation(episode.instruction, datetime.date.fromisoformat(episode.date), observation, lang)
    for step in episode.steps:
        if step.error is not None or (step.parse_error is not None and not unparsed):
            continue
        if observation != "screenshot" and step.ui_tree is None:
            raise ValueError(
                f"step {step.index} of {episode.task!r} has no screen tree to record as {observation} "
                "(its episode was run with screenshots only)"
            )
        image = image_path(_png_of(step, screens)) if observation != "ui_tree" else None
        conversation.observe(image, step.current_app, step.ui_tree)
        messages = copy.deepcopy(conversation.messages)
        for m in messages:
            if m["role"] == "assistant":
                m["weight"] = 0  # context: trained in its own row
        target = assistant_target(step.reasoning, step.answer)
        yield step, messages, target
        conversation.reply(step.content or target)  # kept as the runtime kept it (an older episode: as it reads)


def row_meta(episode: Episode, episode_number: int, step: Turn, steps: int, box, observation: str, lang: str) -> dict:
    """A training row's ``meta`` for ``step`` of ``episode`` (``steps``: the episode's usable steps)."""
    return {
        "format": FORMAT_NAME,
        "lang": lang,
        "task": episode.task,
        "template": episode.template,
        "split": episode.split,
        "episode": episode_number,
        "step": step.index,
        "steps": steps,
        "current_app": step.current_app,
        "target_box": box,
        "model": episode.model,
        **({"observation": observation} if observation != "screenshot" else {}),
    }  # absent: screenshot


def episode_rows(
    episode: Episode,
    episode_number: int,
    image_path,
    screens: Path | None = None,
    observation: str | None = None,
    lang: str | None = None,
) -> list[dict]:
    """The training rows of one episode; ``image_path(png bytes) -> str`` stores a screenshot and returns the path
    the row names. Steps whose request failed or whose reply did not parse give no row. ``observation``: what the
    rows show of each screen (default: what the episode's model was shown); ``ui_tree`` and ``both`` need the steps'
    trees. ``lang``: the runtime's system prompt in the rows (default: the one the episode's model was sent)."""
    observation, lang = observation or episode.observation, lang or episode.lang
    usable = sum(s.error is None and s.parse_error is None for s in episode.steps)
    rows = []
    for step, messages, target in asked_states(episode, image_path, screens, observation, lang):
        try:
            action = parse_action(step.answer)
        except ActionSyntaxError:  # a call the runtime did nothing with: context for the rows after it, no target
            continue
        messages.append({"role": "assistant", "content": target, "weight": 1})
        box = step.target_box if action.type in POINT_ACTIONS else None
        rows.append(
            {"messages": messages, "meta": row_meta(episode, episode_number, step, usable, box, observation, lang)}
        )
    return rows


def rows_observation(path: str | Path) -> str:
    """What the rows of a training file show of each screen (its first row's ``meta.observation``; screenshot when
    it names none): what a model trained on them must be shown when it plays."""
    first = next(jsonl_lines(path), None)
    if first is None:
        return "screenshot"
    if first.error is not None:
        raise UnreadableFile(path, first.number, first.error)
    meta = first.value.get("meta") or {}
    return meta.get("observation", "screenshot") if isinstance(meta, dict) else "screenshot"


class ImageFolder:
    """Screenshots stored once each in ``images/`` beside a JSONL file, named by their content's hash: ``path(png)``
    stores one and gives the path a row of that file names."""

    def __init__(self, jsonl: str | Path):
        self.folder, self.written = Path(jsonl).parent / IMAGES_DIR, set()

    def path(self, png: bytes) -> str:
        name = hashlib.sha256(png).hexdigest()[:16] + ".png"
        if name not in self.written:
            self.folder.mkdir(parents=True, exist_ok=True)  # a ui_tree file has no images
            (self.folder / name).write_bytes(png)
            self.written.add(name)
        return f"{IMAGES_DIR}/{name}"


def record_rows(
    episodes: Iterable[Episode],
    out: str | Path,
    screens: str | Path | None = None,
    only_success: bool = True,
    observation: str | None = None,
    lang: str | None = None,
) -> Recorded:
    """Write the rows of ``episodes`` to the JSONL file ``out`` and their screenshots to ``images/`` beside it.
    ``screens``: the folder the episodes were stored in (their screenshot paths are relative to it), for
    episodes read back from disk. ``only_success``: skip episodes that did not succeed (the oracle's all do).
    ``observation``: what the rows show of each screen (default: what each episode's model was shown); ``lang``: the
    runtime's system prompt in them (default: the one each episode's model was sent)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    images = ImageFolder(out)
    count = kept = skipped = 0
    with open(out, "w", encoding="utf-8") as fh:
        for episode in episodes:
            if only_success and not episode.success:
                skipped += 1
                continue
            kept += 1
            for row in episode_rows(episode, kept, images.path, Path(screens) if screens else None, observation, lang):
                if row["meta"]["step"] <= episode.context_steps:  # a correction's steps before it: context, no target
                    continue
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return Recorded(count, kept, skipped, len(images.written), str(out))
