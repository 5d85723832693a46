"""The phone-action task: does the answer hold the one right AutoGLM action?

Per reply: the action parses as Open-AutoGLM's runtime reads it (``phone.openautoglm.runtime_split``: everything
from ``do(action=`` on, so a reply closed by ``</answer>`` does not), its type is the expected one, it equals the
expected action, for Tap/Double Tap/Long Press the point lies inside the target element's box (the row's
``meta.target_box`` when it has one, as screenshot rows and recorded episodes do; else from its screen description,
``target_box``), for Type the text matches (case and surrounding space ignored), and whether reasoning came with it.
"""

from __future__ import annotations

from pathlib import Path

from ..config.samples import samples_dir
from ..phone.actions import POINT_ACTIONS, ActionSyntaxError, in_box, parse_action, split_answer, target_box
from ..phone.openautoglm import runtime_split
from ..serve.remote import ModelReply
from ..stats import rate
from .task_protocol import Example


class PhoneActionsTask:
    description = "one AutoGLM-Phone action per screen: parse rate, type accuracy, exact match, tap-in-box, Type text"

    def __init__(self, name: str = "phone_actions", default_data: Path | None = None):
        self.name = name
        self.default_data = default_data or samples_dir() / "phone_actions" / "heldout.jsonl"

    def score(self, example: Example, reply: ModelReply) -> dict:
        expected = parse_action(split_answer(example.reference).answer)  # a bad reference is a data error
        split = split_answer(reply.content, reply.reasoning)
        try:  # the action as Open-AutoGLM's runtime reads the reply's content
            got, error = parse_action(runtime_split(reply.content or "")[1]), None
        except ActionSyntaxError as err:
            got, error = None, str(err)
        if reply.error:
            error = reply.error
        type_match = got is not None and got.type == expected.type
        tap_in_box = text_match = None
        if expected.type in POINT_ACTIONS:
            meta = example.row.get("meta") if isinstance(example.row.get("meta"), dict) else {}
            box = meta.get("target_box") or target_box(str(example.row.get("input") or ""), expected.point())
            if box is not None:
                tap_in_box = type_match and in_box(got.point(), box)
        if expected.type == "Type":
            text_match = type_match and got.args["text"].strip().casefold() == expected.args["text"].strip().casefold()
        return {
            "expected_type": expected.type,
            "predicted_type": got.type if got else None,
            "parsed": got is not None,
            "parse_error": error,
            "type_match": type_match,
            "exact": got == expected,
            "tap_in_box": tap_in_box,
            "text_match": text_match,
            "has_reasoning": split.has_reasoning,
            "has_answer_tag": split.has_answer_tag,
        }

    def summarize(self, verdicts: list[dict]) -> dict:
        by_type: dict[str, list[dict]] = {}
        for v in verdicts:
            by_type.setdefault(v["expected_type"], []).append(v)
        return {
            "n": len(verdicts),
            "parse_rate": rate(v["parsed"] for v in verdicts),
            "type_accuracy": rate(v["type_match"] for v in verdicts),
            "exact_match": rate(v["exact"] for v in verdicts),
            "tap_in_box": rate(v["tap_in_box"] for v in verdicts),
            "type_text_match": rate(v["text_match"] for v in verdicts),
            "reasoning_rate": rate(v["has_reasoning"] for v in verdicts),
            # both present and usable: what a reasoning-format fine-tune should produce every time
            "reasoning_and_answer_rate": rate(v["has_reasoning"] and v["parsed"] for v in verdicts),
            "by_type": {
                t: {
                    "n": len(vs),
                    "type_accuracy": rate(v["type_match"] for v in vs),
                    "exact_match": rate(v["exact"] for v in vs),
                }
                for t, vs in sorted(by_type.items())
            },
        }


__all__ = ["PhoneActionsTask"]
