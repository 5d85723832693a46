"""Row formats of training JSONL, normalised to chat messages. Bad rows raise DataError naming file:line.

An assistant message may carry ``"weight": 0`` or ``1`` (OpenAI's fine-tuning convention): 0 makes it context
only (no loss on it), 1 (the default) a training target. ``workbench agent record`` writes 0 on every earlier
assistant turn of a row and 1 on its last, so a step is learned once, in its own row.

A user message's content may be a list of OpenAI-style parts (text / image_url), and a row may carry
``"images": ["a.png", ...]`` with one ``<image>`` placeholder per image in its user text (LLaMA-Factory's
convention): the placeholders become image_url parts, in order. Images are decoded later
(``workbench.data.multimodal``), relative to the JSONL file.
"""

from __future__ import annotations

import re
from typing import Any

from .multimodal import content_parts

ROLES = ("system", "user", "assistant")
IMAGE_PLACEHOLDER = "<image>"


class DataError(ValueError):
    """A data problem located at ``file:line`` (or at the file when line is None)."""

    def __init__(self, path: str, line: int | None, reason: str):
        self.path, self.line, self.reason = path, line, reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


PREFERENCE_KEYS = ("prompt", "chosen", "rejected")  # TRL's preference format (conversational: lists of messages)


def detect_format(row: dict) -> str:
    if all(k in row for k in PREFERENCE_KEYS):
        return "preference"
    if "messages" in row:
        return "chat"
    if "instruction" in row or "output" in row:
        return "instruction"
    return "unknown"


def row_to_messages(row: Any, fmt: str = "auto", system_prompt: str | None = None) -> list[dict]:
    """Messages for one parsed row; raises ValueError with the reason (the caller adds file:line)."""
    if not isinstance(row, dict):
        raise ValueError(f"a row is a JSON object, got {type(row).__name__}")
    kind = detect_format(row) if fmt == "auto" else fmt
    if kind == "preference":
        raise ValueError(
            "a preference pair (prompt, chosen, rejected) is no supervised row: train pairs with "
            "training.method dpo (as data.train), or give this file's chosen side as messages"
        )
    if kind == "chat":
        messages = _chat(row)
    elif kind == "instruction":
        messages = _instruction(row)
    else:
        raise ValueError(
            f"unknown row format (keys: {sorted(row)}): use 'messages' (chat) or 'instruction'/'input'/'output'"
        )
    if "images" in row:
        messages = _place_images(messages, row["images"])
    if system_prompt and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": system_prompt}] + messages
    return messages


def _place_images(messages: list[dict], images: Any) -> list[dict]:
    """The ``images`` shortcut: each ``<image>`` placeholder of the user text becomes the next image's part."""
    if not isinstance(images, list) or not all(isinstance(i, str) and i.strip() for i in images):
        raise ValueError("'images' must be a list of image paths (relative to the JSONL file) or data: URLs")
    placeholders = sum(m["content"].count(IMAGE_PLACEHOLDER) for m in messages if isinstance(m["content"], str))
    if placeholders != len(images):
        more = (
            "more <image> placeholders than images"
            if placeholders > len(images)
            else "fewer <image> placeholders than images"
        )
        raise ValueError(
            f"{more}: {placeholders} placeholder(s) for {len(images)} image(s); put one <image> in the "
            "user text where each image goes"
        )
    pending = iter(images)
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m["content"], str) or IMAGE_PLACEHOLDER not in m["content"]:
            out.append(m)
            continue
        if m["role"] != "user":
            raise ValueError(f"messages[{i}] ({m['role']}) holds an <image> placeholder; images go in user messages")
        parts = []
        for j, piece in enumerate(re.split(re.escape(IMAGE_PLACEHOLDER), m["content"])):
            if j:
                parts.append({"type": "image_url", "image_url": {"url": next(pending)}})
            if piece:
                parts.append({"type": "text", "text": piece})
        out.append({"role": m["role"], "content": parts})
    return out


def _chat(row: dict) -> list[dict]:
    msgs = row.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("'messages' must be a non-empty list of {role, content} objects")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise ValueError(f"messages[{i}] is {type(m).__name__}, not an object with role and content")
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role is {role!r}; expected one of {', '.join(ROLES)}")
        if role == "user":
            content = content_parts(content, f"messages[{i}].content")
        elif not isinstance(content, str):
            raise ValueError(
                f"messages[{i}].content must be a string, got {type(content).__name__} (only user "
                "messages may hold a list of parts with images)"
            )
        if role == "system" and i != 0:
            raise ValueError(f"messages[{i}] is a system message; only the first message may be one")
        message = {"role": role, "content": content}
        if "weight" in m:
            weight = m["weight"]
            if role != "assistant":
                raise ValueError(
                    f"messages[{i}].weight: only assistant messages carry a weight (0: context, "
                    f"1: trained); remove it from the {role} message"
                )
            if weight not in (0, 1) or isinstance(weight, bool):
                raise ValueError(f"messages[{i}].weight must be 0 (context, no loss) or 1 (trained), got {weight!r}")
            message["weight"] = weight
        out.append(message)
    if not any(m["role"] == "assistant" and m["content"].strip() for m in out):
        raise ValueError("no assistant message with content: nothing to train on")
    if not any(m["role"] == "assistant" and trained(m) for m in out):
        raise ValueError(
            "every assistant message has weight 0: nothing to train on (give the answer to learn "
            "weight 1, or leave weight out)"
        )
    if out[-1]["role"] != "assistant":
        raise ValueError("the last message must be the assistant's (a trailing user turn has no answer to learn)")
    return out


def preference_sides(row: dict, system_prompt: str | None = None) -> tuple[list[dict], list[dict]]:
    """(chosen, rejected) conversations of a preference row in TRL's conversational form: ``prompt`` (the messages up
    to a user turn) followed by each side's one assistant message; ``system_prompt`` put first where the prompt has
    no system message (as ``row_to_messages`` does). ValueError saying what is wrong."""
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise ValueError("'prompt' must be a non-empty list of {role, content} messages ending with a user turn")
    if system_prompt and not (isinstance(prompt[0], dict) and prompt[0].get("role") == "system"):
        prompt = [{"role": "system", "content": system_prompt}] + prompt
    sides = []
    for name in ("chosen", "rejected"):
        side = row.get(name)
        if not (
            isinstance(side, list)
            and len(side) == 1
            and isinstance(side[0], dict)
            and side[0].get("role") == "assistant"
            and isinstance(side[0].get("content"), str)
            and side[0]["content"].strip()
        ):
            raise ValueError(
                f"'{name}' must be a list of one assistant message with content, as TRL's conversational "
                f'preference rows: [{{"role": "assistant", "content": "..."}}]'
            )
        messages = _chat({"messages": prompt + [{"role": "assistant", "content": side[0]["content"]}]})
        if messages[-2]["role"] != "user":
            raise ValueError("'prompt' must end with a user turn: the chosen and rejected replies answer it")
        sides.append(messages)
    if sides[0][-1]["content"] == sides[1][-1]["content"]:
        raise ValueError("'chosen' and 'rejected' are the same reply: a pair needs two different ones")
    return sides[0], sides[1]


def trained(message: dict) -> bool:
    """Whether an assistant message is a training target (its weight is not 0)."""
    return message.get("weight", 1) != 0


def without_weights(messages: list[dict]) -> list[dict]:
    """The messages as a model is sent them: the training-only ``weight`` key removed."""
    return [{k: v for k, v in m.items() if k != "weight"} if "weight" in m else m for m in messages]


def _instruction(row: dict) -> list[dict]:
    instruction, inp, output = row.get("instruction"), row.get("input", ""), row.get("output")
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError("'instruction' must be a non-empty string")
    if inp is None:
        inp = ""
    if not isinstance(inp, str):
        raise ValueError(f"'input' must be a string, got {type(inp).__name__}")
    if not isinstance(output, str) or not output.strip():
        raise ValueError("'output' must be a non-empty string")
    user = instruction if not inp.strip() else f"{instruction}\n\n{inp}"
    return [{"role": "user", "content": user}, {"role": "assistant", "content": output}]
