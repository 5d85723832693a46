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
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

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


def _png_of(step: Turn, screens: Optional[Path]) -> bytes:
    if step.png is not None:
        return step.png
    if screens is None or step.screenshot is None:
        raise ValueError(f"step {step.index} of {step.current_app!r} has no screenshot to record (was the run stored "
                         "with --no-screens?)")
    return (screens / step.screenshot).read_bytes()


def episode_rows(episode: Episode, episode_number: int, image_path, screens: Optional[Path] = None,
                 observation: Optional[str] = None, lang: Optional[str] = None) -> list[dict]:
    """The training rows of one episode; ``image_path(png bytes) -> str`` stores a screenshot and returns the path
    the row names. Steps whose request failed or whose reply did not parse give no row. ``observation``: what the
    rows show of each screen (default: what the episode's model was shown); ``ui_tree`` and ``both`` need the steps'
    trees. ``lang``: the runtime's system prompt in the rows (default: the one the episode's model was sent)."""
    observation, lang = observation or episode.observation, lang or episode.lang
    conversation = Conversation(episode.instruction, datetime.date.fromisoformat(episode.date), observation, lang)
    rows = []
    usable = [s for s in episode.steps if s.error is None and s.parse_error is None]
    for step in usable:
        if observation != "screenshot" and step.ui_tree is None:
            raise ValueError(f"step {step.index} of {episode.task!r} has no screen tree to record as {observation} "
                             "(its episode was run with screenshots only)")
        image = image_path(_png_of(step, screens)) if observation != "ui_tree" else None
        conversation.observe(image, step.current_app, step.ui_tree)
        messages = copy.deepcopy(conversation.messages)
        for m in messages:
            if m["role"] == "assistant":
                m["weight"] = 0  # context: trained in its own row
        target = assistant_target(step.reasoning, step.answer)
        try:
            action = parse_action(step.answer)
        except ActionSyntaxError:  # a call the runtime did nothing with: context for the rows after it, no target
            conversation.reply(target)
            continue
        messages.append({"role": "assistant", "content": target, "weight": 1})
        box = step.target_box if action.type in POINT_ACTIONS else None
        rows.append({"messages": messages, "meta": {
            "format": FORMAT_NAME, "lang": lang, "task": episode.task, "template": episode.template, "split": episode.split,
            "episode": episode_number, "step": step.index, "steps": len(usable), "current_app": step.current_app,
            "target_box": box, "model": episode.model,
            **({"observation": observation} if observation != "screenshot" else {})}})  # absent: screenshot
        conversation.reply(target)
    return rows


def record_rows(episodes: Iterable[Episode], out: str | Path, screens: Optional[str | Path] = None,
                only_success: bool = True, observation: Optional[str] = None, lang: Optional[str] = None) -> Recorded:
    """Write the rows of ``episodes`` to the JSONL file ``out`` and their screenshots to ``images/`` beside it.
    ``screens``: the folder the episodes were stored in (their screenshot paths are relative to it), for
    episodes read back from disk. ``only_success``: skip episodes that did not succeed (the oracle's all do).
    ``observation``: what the rows show of each screen (default: what each episode's model was shown); ``lang``: the
    runtime's system prompt in them (default: the one each episode's model was sent)."""
    out = Path(out)
    images = out.parent / IMAGES_DIR
    out.parent.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()

    def image_path(png: bytes) -> str:
        name = hashlib.sha256(png).hexdigest()[:16] + ".png"
        if name not in written:
            images.mkdir(exist_ok=True)  # a ui_tree file has no images
            (images / name).write_bytes(png)
            written.add(name)
        return f"{IMAGES_DIR}/{name}"

    count = kept = skipped = 0
    with open(out, "w", encoding="utf-8") as fh:
        for episode in episodes:
            if only_success and not episode.success:
                skipped += 1
                continue
            kept += 1
            for row in episode_rows(episode, kept, image_path, Path(screens) if screens else None, observation, lang):
                if row["meta"]["step"] <= episode.context_steps:  # a correction's steps before it: context, no target
                    continue
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return Recorded(count, kept, skipped, len(written), str(out))
