"""The reasoning-format phone-action set: the script's conversion of phone_actions/, every answer a short
<think> and one parseable <answer> action equal to the source row's, with no closing tag."""

from __future__ import annotations

import importlib.util
import json

from workbench.eval import get_task
from workbench.phone.actions import parse_action, split_answer

from ..conftest import SAMPLES


def _script():
    spec = importlib.util.spec_from_file_location("make_reasoning_samples", SAMPLES / "make_reasoning_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_files_are_the_scripts_deterministic_output():
    assert _script().check() == []


def test_every_answer_is_short_reasoning_then_the_source_action():
    for split in ("train", "heldout"):
        source = [json.loads(x) for x in (SAMPLES / "phone_actions" / f"{split}.jsonl").read_text("utf-8").splitlines()]
        target = [
            json.loads(x)
            for x in (SAMPLES / "phone_actions_reasoning" / f"{split}.jsonl").read_text("utf-8").splitlines()
        ]
        assert len(source) == len(target) > 0
        for s, t in zip(source, target):
            parts = split_answer(t["output"])
            assert parts.has_reasoning and parts.has_answer_tag
            assert (
                t["output"].startswith("<think>")
                and "</think>\n<answer>do(" in t["output"]
                or "</think>\n<answer>finish(" in t["output"]
            )
            assert not t["output"].endswith("</answer>")  # the runtime would parse the closing tag into the action
            assert parse_action(parts.answer) == parse_action(s["output"])
            assert parts.reasoning[-1] in ".。" and len(parts.reasoning) < 120
            assert {k: v for k, v in t.items() if k != "output"} == {k: v for k, v in s.items() if k != "output"}


def test_reasoning_task_scores_its_own_references_perfectly():
    from workbench.eval import load_eval_examples
    from workbench.serve.remote import ModelReply

    task = get_task("phone_actions_reasoning")
    examples = load_eval_examples(task.default_data)
    s = task.summarize([task.score(ex, ModelReply(ex.reference)) for ex in examples])
    assert s["exact_match"] == s["parse_rate"] == s["reasoning_and_answer_rate"] == 1.0
    assert s["tap_in_box"] == 1.0 and s["type_text_match"] == 1.0


def test_reasoning_templates_are_one_or_two_sentences():
    script = _script()
    for templates in (script.EN, script.ZH):
        assert set(templates) == set(script.EN)
        for text in templates.values():
            ends = text.count(". ") + text.count("。") + (not text.endswith("。"))
            assert 1 <= ends <= 2, text
