"""What a task is: examples read from a JSONL file, a scorer giving each reply a verdict, and a summary of the
verdicts. Tasks are pluggable by name (``workbench.eval.registry.register_task``); ``workbench eval --task NAME``
looks them up there.

The contract of a task:
- ``score(example, reply) -> dict``: the verdict of one reply, flat JSON values (booleans for pass/fail,
  None where a metric does not apply to that example);
- ``summarize(verdicts) -> dict``: the task's metrics over the verdicts, rates in 0..1, None when no example
  was applicable.
A task with ``needs_model = True`` (held-out loss) instead ``measure``s a model in memory:
``measure(model, tokenizer, data, limit=..., ...) -> dict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..config.files import UnreadableFile, jsonl_lines
from ..data.formats import DataError, row_to_messages, without_weights
from ..image_io import inline_images
from ..serve.remote import ModelReply


@dataclass(frozen=True)
class Example:
    index: int  # line number in the data file (1-based)
    messages: list[dict]  # the prompt: every message of the row but the last assistant answer, images inline
    reference: str  # the row's last assistant answer
    row: dict = field(default_factory=dict)  # the row as read (a screen description in 'input', ...)


class Task(Protocol):
    name: str
    description: str
    default_data: Path | None

    def score(self, example: Example, reply: ModelReply) -> dict: ...

    def summarize(self, verdicts: list[dict]) -> dict: ...


def load_eval_examples(path: str | Path, limit: int | None = None, system_prompt: str | None = None) -> list[Example]:
    """The rows of a chat or instruction JSONL file as prompts with reference answers, rendered as training
    renders them (``workbench.data.formats``); DataError naming file:line on a bad row. Each row's images are
    read here (paths relative to the file's folder) and carried inline as base64 data: URLs, so the prompts go to
    any OpenAI-compatible server as they are, and a missing screenshot is a data error, not a failed request."""
    path = Path(path)
    examples, images = [], {}  # images: one data: URL per screenshot file, shared by the rows showing it
    try:
        for line in jsonl_lines(path):
            number, row = line.number, line.value
            try:
                if line.error is not None:
                    raise ValueError(line.error)
                messages = inline_images(row_to_messages(row, system_prompt=system_prompt), path.parent, images)
            except ValueError as err:
                raise DataError(str(path), number, str(err)) from None
            except OSError as err:
                raise DataError(str(path), number, f"cannot read an image of the row: {err}") from None
            examples.append(Example(number, without_weights(messages[:-1]), messages[-1]["content"], row))
            if limit is not None and len(examples) >= limit:
                break
    except UnreadableFile as err:
        raise DataError(str(path), err.line, f"cannot read the task data: {err.reason}") from None
    if not examples:
        raise DataError(str(path), None, "no rows to evaluate")
    return examples
