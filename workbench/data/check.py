"""Lint a training file before a run reads it: every problem of every row as ``file:line: why``.

Per row: it is JSON and a chat or instruction row (``workbench.data.formats``); its images exist and open; for rows
whose answers are phone actions (AutoGLM-Phone's grammar, ``workbench.phone.actions``) each answer parses, with
points on the 0-999 grid, and a Tap / Double Tap / Long Press lands inside ``meta.target_box`` when the row has
one; rows marked ``meta.format: "open-autoglm"`` (``workbench agent record``) conform to Open-AutoGLM's runtime
format (``workbench.phone.conversation``); and, given a model's tokenizer, the row's tokens (images included) fit the
model's context or ``max_length``. The report counts the rows of each form (``CheckReport.forms``): ``open-autoglm``,
``legacy`` (``meta.format: "autoglm-runtime"``, the form this workbench wrote before: still trainable, but the
runtime cannot parse replies learned from it; ``workbench data convert`` rewrites them), ``preference`` and ``other``.

A preference pair (``prompt``, ``chosen``, ``rejected``: TRL's conversational preference format, as
``agent.labels.preference_rows`` writes it) is checked as the training row its prompt and chosen reply make (the
runtime format and actions where its ``meta`` says so, images, tokens); its rejected reply, a reply that went wrong,
only for its length; the two replies must differ.

A row holds phone actions when ``actions`` is ``all``, or (``auto``) when it has ``meta.target_box`` or the runtime
format, or an answer that is ``<answer>...`` or starts with ``do(`` / ``finish(``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..config.files import UnreadableFile, jsonl_lines
from ..image_io import ImageSourceError, load_image, resolve_images
from ..phone.actions import GRID, POINT_ACTIONS, ActionSyntaxError, in_box, parse_action, split_answer
from ..phone.conversation import FORMAT_NAME, LEGACY_FORMAT_NAME, runtime_problems
from .formats import detect_format, preference_sides, row_to_messages
from .multimodal import encode_chat, has_images
from .tokenize import tokenize_messages

ACTION_MODES = ("auto", "all", "none")
_ACTION_TEXT = re.compile(r"^\s*(?:do|finish)\(|<answer>")


@dataclass
class CheckReport:
    path: str
    rows: int = 0
    problems: list[str] = field(default_factory=list)  # "file:line: why"
    longest: int = 0  # tokens of the longest row (with a tokenizer)
    forms: dict[str, int] = field(default_factory=dict)  # rows per form: open-autoglm, legacy, other
    langs: dict[str, int] = field(default_factory=dict)  # runtime-format rows per system-prompt language (meta.lang)

    def forms_line(self) -> str:
        """The rows of each form, in words; the fix for legacy rows."""
        names = {
            FORMAT_NAME: "in Open-AutoGLM's runtime format",
            "preference": "preference pairs (prompt, chosen, "
            "rejected: TRL's conversational preference format; the chosen side checked as a training row)",
            "legacy": f"in the legacy form (meta.format "
            f"{LEGACY_FORMAT_NAME}: replies closed by </answer>, which the runtime cannot parse; `workbench data "
            "convert FILE OUT` rewrites them)",
            "other": "in no agent format (chat or instruction rows)",
        }
        langs = ", ".join(f"{n} lang {lang}" for lang, n in self.langs.items())
        names[FORMAT_NAME] += f" ({langs})" if langs else ""
        return "; ".join(f"{n} {names[form]}" for form, n in self.forms.items())


def _is_action_row(row: dict, messages: list[dict], mode: str) -> bool:
    if mode != "auto":
        return mode == "all"
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    if meta.get("format") in (FORMAT_NAME, LEGACY_FORMAT_NAME) or meta.get("target_box") is not None:
        return True
    return any(m["role"] == "assistant" and _ACTION_TEXT.search(m["content"]) for m in messages)


def _box_problem(box) -> str | None:
    if not (
        isinstance(box, list)
        and len(box) == 4
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= GRID for v in box)
        and box[0] <= box[2]
        and box[1] <= box[3]
    ):
        return (
            f"meta.target_box must be [x1, y1, x2, y2] with integers in 0..{GRID}, x1 <= x2 and y1 <= y2 (got {box!r})"
        )
    return None


def _action_problems(row: dict, messages: list[dict], grammar: bool = True) -> list[str]:
    """The answers' grammar (unless ``grammar`` is False: the runtime-format check reports it) and the last
    answer's point against meta.target_box."""
    problems = []
    answers = [m["content"] for m in messages if m["role"] == "assistant"]
    last = None
    for i, content in enumerate(answers, 1):
        try:
            last = parse_action(split_answer(content).answer)
        except ActionSyntaxError as err:
            which = "the answer" if len(answers) == 1 else f"assistant turn {i}"
            if grammar:
                problems.append(f"{which} is not one valid action: {err}")
            last = None
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    box = meta.get("target_box")
    if box is not None:
        why = _box_problem(box)
        if why:
            problems.append(why)
        elif last is not None and last.type in POINT_ACTIONS and not in_box(last.point(), box):
            problems.append(f"{last.type} at {list(last.point())} lies outside meta.target_box {box}")
    return problems


def _image_problems(messages: list[dict], base_dir: Path) -> list[str]:
    problems, n = [], 0
    for m in messages:
        if isinstance(m["content"], list):
            for part in m["content"]:
                if part["type"] == "image_url":
                    n += 1
                    try:
                        load_image(part["image_url"]["url"], base_dir)
                    except ImageSourceError as err:
                        problems.append(f"image {n}: {err}")
    return problems


def _token_count(messages: list[dict], tok, base_dir: Path) -> int:
    if tok.processor is not None:
        return len(encode_chat(tok.processor, resolve_images(messages, base_dir)).input_ids)
    if has_images(messages):
        raise ValueError("the row holds images, but the model is text-only: check it with a vision-language model")
    return len(tokenize_messages(tok.tokenizer, messages, 1 << 62).input_ids)


def _row_problems(
    row: dict,
    messages: list[dict],
    meta: dict,
    tokenizer,
    limit: int | None,
    actions: str,
    base_dir: Path,
    report: CheckReport,
) -> list[str]:
    """One training conversation's problems (a row's, or a pair's chosen side: ``row`` then holds its ``messages``):
    its images, its runtime format and actions, its tokens against ``limit``."""
    problems = _image_problems(messages, base_dir)
    images_ok = not problems
    if meta.get("format") == FORMAT_NAME:
        problems += [f"runtime format: {why}" for why in runtime_problems(row["messages"], meta.get("observation"))]
        report.langs[str(meta.get("lang"))] = report.langs.get(str(meta.get("lang")), 0) + 1
    if _is_action_row(row, messages, actions):
        problems += _action_problems(row, messages, grammar=meta.get("format") != FORMAT_NAME)
    if tokenizer is not None and images_ok:
        problems += _token_problems(messages, tokenizer, limit, base_dir, report)
    return problems


def _token_problems(
    messages: list[dict], tokenizer, limit: int | None, base_dir: Path, report: CheckReport
) -> list[str]:
    try:
        count = _token_count(messages, tokenizer, base_dir)
    except ValueError as err:
        return [str(err)]
    report.longest = max(report.longest, count)
    if count > limit:
        return [
            f"{count} tokens, more than the {limit}-token context: shorten the row (fewer turns, smaller "
            "screenshots) or check against a longer context"
        ]
    return []


def check_file(path: str | Path, tokenizer=None, max_length: int | None = None, actions: str = "auto") -> CheckReport:
    """Every problem of the JSONL file at ``path``. ``tokenizer``: a ``workbench.models.LoadedTokenizer`` to count
    each row's tokens against ``max_length`` (default: its model's context)."""
    if actions not in ACTION_MODES:
        raise ValueError(f"actions must be one of {', '.join(ACTION_MODES)}, got {actions!r}")
    report = CheckReport(str(path))
    base_dir = Path(path).parent
    limit = max_length or (tokenizer.context if tokenizer is not None else None)

    def problem(line: int | None, why: str) -> None:
        report.problems.append(f"{path}:{line}: {why}" if line is not None else f"{path}: {why}")

    try:
        for line in jsonl_lines(str(path)):
            number, row = line.number, line.value
            report.rows += 1
            try:
                if line.error is not None:
                    raise ValueError(line.error)
                pair = detect_format(row) == "preference" if isinstance(row, dict) else False
                sides = preference_sides(row) if pair else [row_to_messages(row)]
            except ValueError as err:
                problem(number, str(err))
                continue
            meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
            form = (
                "preference"
                if pair
                else meta.get("format") == FORMAT_NAME
                and FORMAT_NAME
                or (meta.get("format") == LEGACY_FORMAT_NAME and "legacy")
                or "other"
            )
            report.forms[form] = report.forms.get(form, 0) + 1
            # a pair: its chosen side (the prompt and the reply to learn) is checked as a training row is; its
            # rejected side (a reply that went wrong: maybe one that does not parse) only for its length
            checked = {**row, "messages": row["prompt"] + row["chosen"]} if pair else row
            for why in _row_problems(checked, sides[0], meta, tokenizer, limit, actions, base_dir, report):
                problem(number, why)
            if pair and tokenizer is not None and not _image_problems(sides[1], base_dir):
                for why in _token_problems(sides[1], tokenizer, limit, base_dir, report):
                    problem(number, f"rejected: {why}")
    except (UnreadableFile, OSError) as err:
        problem(getattr(err, "line", None), getattr(err, "reason", None) or f"cannot read the file: {err}")
    if report.rows == 0 and not report.problems:
        problem(None, "no rows")
    return report
