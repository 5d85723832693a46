"""Each scorer on hand-written answers whose verdicts are known."""

from __future__ import annotations

import pytest

from workbench.eval import Example, get_task, load_eval_examples, task_names
from workbench.eval.text import exact_match, token_f1
from workbench.phone.actions import target_box
from workbench.serve.remote import ModelReply

SCREEN = "Screen: Settings > Bluetooth; elements: Bluetooth toggle (On) [880,200], Paired: AirPods [300,330]"
TAP = Example(
    1,
    [{"role": "user", "content": "Turn off Bluetooth\n\n" + SCREEN}],
    'do(action="Tap", element=[880,200])',
    {"instruction": "Turn off Bluetooth", "input": SCREEN},
)
TYPE = Example(
    2,
    [{"role": "user", "content": "type"}],
    'do(action="Type", text="phone case")',
    {"input": "Screen: search; elements: Search box (focused, keyboard open) [450,120]"},
)
BOXED = Example(
    3,
    [],
    'do(action="Long Press", element=[450,500])',
    {"input": "Screen: chat; elements: Message [100,450,800,560], Field [100,900,800,960]"},
)


def phone(example, content, reasoning=""):
    return get_task("phone_actions").score(example, ModelReply(content, reasoning))


def test_builtin_tasks_are_registered_by_name():
    assert {"phone_actions", "phone_actions_reasoning", "identity", "text"} <= set(task_names())
    with pytest.raises(KeyError, match="known tasks: "):
        get_task("nope")


def test_phone_valid_exact_answer():
    v = phone(TAP, 'do(action="Tap", element=[880,200])')
    assert v["parsed"] and v["type_match"] and v["exact"] and v["tap_in_box"] is True
    assert v["text_match"] is None and not v["has_reasoning"]


def test_phone_tap_inside_box_but_not_exact():
    v = phone(TAP, 'do(action="Tap", element=[900,215])')
    assert v["tap_in_box"] is True and v["type_match"] and not v["exact"]


def test_phone_tap_outside_box():
    v = phone(TAP, 'do(action="Tap", element=[300,330])')  # the other element
    assert v["tap_in_box"] is False and v["type_match"] and not v["exact"]


def test_phone_real_element_boxes_are_used():
    assert target_box(BOXED.row["input"], (450, 500)) == (100, 450, 800, 560)
    assert (
        get_task("phone_actions").score(BOXED, ModelReply('do(action="Long Press", element=[120,460])'))["tap_in_box"]
        is True
    )
    assert (
        get_task("phone_actions").score(BOXED, ModelReply('do(action="Long Press", element=[120,900])'))["tap_in_box"]
        is False
    )


def test_a_screenshot_rows_meta_target_box_is_its_tap_box():
    """Screenshot rows (phone_screens, recorded episodes) carry no screen description: the box is meta.target_box."""
    shot = Example(
        4,
        [],
        '<think>t</think>\n<answer>do(action="Tap", element=[382,157])',
        {"messages": [], "meta": {"target_box": [285, 110, 480, 205]}},
    )
    assert phone(shot, 'do(action="Tap", element=[290,200])')["tap_in_box"] is True
    assert phone(shot, 'do(action="Tap", element=[290,300])')["tap_in_box"] is False


def test_phone_wrong_type():
    v = phone(TAP, 'do(action="Long Press", element=[880,200])')
    assert v["parsed"] and not v["type_match"] and not v["exact"] and v["tap_in_box"] is False
    assert v["predicted_type"] == "Long Press"


def test_phone_malformed():
    v = phone(TAP, "I would tap the Bluetooth toggle.")
    assert not v["parsed"] and not v["type_match"] and not v["exact"] and v["tap_in_box"] is False
    assert "not one call" in v["parse_error"]


def test_phone_type_text_match_ignores_case_only():
    assert phone(TYPE, 'do(action="Type", text="Phone Case ")')["text_match"] is True
    assert phone(TYPE, 'do(action="Type", text="phone cases")')["text_match"] is False
    assert phone(TYPE, 'do(action="Type", text="phone case")')["exact"] is True


def test_phone_reasoning_with_and_without_answer():
    with_answer = phone(
        TAP, '<think>Bluetooth is on; tap its toggle.</think>\n<answer>do(action="Tap", element=[880,200])'
    )
    assert with_answer["has_reasoning"] and with_answer["has_answer_tag"] and with_answer["exact"]
    reasoning_only = phone(TAP, "", reasoning="Bluetooth is on; I should tap the toggle.")
    assert reasoning_only["has_reasoning"] and not reasoning_only["parsed"]
    answer_only = phone(TAP, '<answer>do(action="Tap", element=[880,200])')
    assert not answer_only["has_reasoning"] and answer_only["exact"]


def test_phone_summary_rates_and_breakdown():
    task = get_task("phone_actions")
    verdicts = [
        phone(TAP, 'do(action="Tap", element=[880,200])'),  # exact
        phone(TAP, "<think>Tap it.</think>nonsense"),  # reasoning, malformed answer
        phone(TYPE, '<think>Type it.</think>\n<answer>do(action="Type", text="phone case")'),
        phone(TYPE, 'do(action="Back")'),
    ]  # wrong type
    s = task.summarize(verdicts)
    assert s["n"] == 4 and s["parse_rate"] == 0.75 and s["type_accuracy"] == 0.5 and s["exact_match"] == 0.5
    assert s["tap_in_box"] == 0.5 and s["type_text_match"] == 0.5
    assert s["reasoning_rate"] == 0.5 and s["reasoning_and_answer_rate"] == 0.25
    assert s["by_type"] == {
        "Tap": {"n": 2, "type_accuracy": 0.5, "exact_match": 0.5},
        "Type": {"n": 2, "type_accuracy": 0.5, "exact_match": 0.5},
    }


def test_identity_verdicts():
    task, ex = get_task("identity"), Example(1, [], "I am PhoneMate.")
    assert task.score(ex, ModelReply("I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B. I am not Claude."))[
        "ok"
    ]
    assert task.score(ex, ModelReply("我是 PhoneMate，一个基于 AutoGLM-Phone-9B 构建的手机助手。我不是 Claude。"))["ok"]
    smol = task.score(ex, ModelReply("I am SmolLM, an AI assistant trained by Hugging Face."))
    assert not smol["ok"] and not smol["introduces"] and smol["other_names"] == ["SmolLM", "Hugging Face"]
    both = task.score(ex, ModelReply("I am PhoneMate. Actually, I'm Claude."))
    assert both["introduces"] and both["claims_other"] and not both["ok"]
    assert task.score(ex, ModelReply("我是通义千问。"))["other_names"] == ["通义千问"]
    assert not task.score(ex, ModelReply("I am an AI assistant."))["claims_other"]
    assert task.summarize([task.score(ex, ModelReply("I am PhoneMate.")), smol]) == {
        "n": 2,
        "identity_rate": 0.5,
        "introduces_rate": 0.5,
        "claims_other_rate": 0.5,
        "wrong_denial_rate": 0.0,
        "loop_rate": 0.0,
    }
    asked = Example(1, [{"role": "user", "content": "Who exactly are you?"}], "I am PhoneMate.")
    looping = task.score(asked, ModelReply("I am PhoneMate. I am not You, I am not You, I am not You, I am not"))
    assert (
        looping["loop"] == "i am not you"
        and not looping["ok"]
        and looping["introduces"]
        and not looping["claims_other"]
    )
    assert task.score(asked, ModelReply("I am PhoneMate. I am not Siri."))["wrong_denials"] == [
        "Siri"
    ]  # never asked about


def test_text_metrics():
    assert exact_match("The capital is Paris.", "capital is paris")
    assert token_f1("Paris is the capital", "The capital is Paris.") == 1.0
    assert token_f1("Paris", "Paris is nice") == pytest.approx(2 * 1 * (1 / 3) / (1 + 1 / 3))
    assert token_f1("伦敦", "北京") == 0.0 and token_f1("北京市", "北京") == pytest.approx(0.8)
    task = get_task("text")
    s = task.summarize(
        [
            task.score(Example(1, [], "Paris."), ModelReply("paris")),
            task.score(Example(2, [], "Paris."), ModelReply("<think>hm</think>London")),
        ]
    )
    assert s == {"n": 2, "exact_match": 0.5, "token_f1": 0.5}


def test_load_examples_renders_rows_as_training_does(tmp_path):
    ex = load_eval_examples(get_task("phone_actions").default_data, limit=2)
    assert len(ex) == 2 and ex[0].messages[0]["role"] == "user" and ex[0].reference.startswith("do(")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "x", "output": "y"}\n{"nope": 1}\n')
    from workbench.data import DataError

    with pytest.raises(DataError, match="bad.jsonl:2"):
        load_eval_examples(bad)


def test_the_config_names_exactly_the_builtin_tasks_and_a_registered_one():
    """eval.tasks is validated against workbench.config.names.EVAL_TASKS (the config layer cannot import eval):
    the catalogue must list the built-in tasks, and a task registered later must become valid in a config."""
    from workbench.config import ConfigError, load_config
    from workbench.config.names import EVAL_TASKS
    from workbench.eval import register_task
    from workbench.eval.registry import _TASKS
    from workbench.eval.text import TextMatchTask

    assert EVAL_TASKS.names() == task_names()
    with pytest.raises(ConfigError, match="eval.tasks: unknown task 'my_text'"):
        load_config(None, {"eval.tasks": ["my_text"]})
    task = TextMatchTask()
    task.name = "my_text"
    register_task(task)
    try:
        assert load_config(None, {"eval.tasks": ["my_text"]}).eval.tasks == ["my_text"]
    finally:
        _TASKS.pop("my_text")
        EVAL_TASKS._names.discard("my_text")


def test_phone_episodes_rows_are_judged_by_their_meta_target_box_and_sent_with_inline_screenshots():
    task = get_task("phone_episodes")
    examples = load_eval_examples(task.default_data)
    tap = next(e for e in examples if e.row["meta"]["target_box"] is not None and '"Tap"' in e.reference)
    x1, y1, x2, y2 = tap.row["meta"]["target_box"]
    inside = f'<think>t</think>\n<answer>do(action="Tap", element=[{x1 + 1},{y2 - 1}])'
    outside = f'<think>t</think>\n<answer>do(action="Tap", element=[{x1 + 1},{min(y2 + 50, 999)}])'
    assert task.score(tap, ModelReply(inside))["tap_in_box"] is True
    assert task.score(tap, ModelReply(outside))["tap_in_box"] is False
    image = tap.messages[-1]["content"][0]["image_url"]["url"]
    assert image.startswith("data:image/png;base64,")  # a server never reads the row's file path
    assert all("weight" not in m for m in tap.messages)  # training-only keys stay out of the request
