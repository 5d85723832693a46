"""Each reward by name on hand-written completions against a row's reference and screen."""

import pytest

from workbench.eval.phone import PhoneActionsTask
from workbench.eval.task_protocol import Example
from workbench.rewards import REWARD_FUNCTIONS
from workbench.serve.remote import ModelReply

SCREEN = "Screen: Settings; elements: Wi-Fi [500,300], Bluetooth [500,420]"


def example(reference: str, screen: str = SCREEN) -> Example:
    return Example(7, [{"role": "user", "content": "do it"}], reference, {"input": screen})


def reward(name: str, ex: Example, completion: str) -> float:
    verdict = PhoneActionsTask().score(ex, ModelReply(content=completion))
    return REWARD_FUNCTIONS[name](ex, completion, verdict)


TAP = example('<think>x</think>\n<answer>do(action="Tap", element=[500,300])')


@pytest.mark.parametrize(
    "completion,value",
    [
        ('<think>tap it</think>\n<answer>do(action="Tap", element=[510,310])', 1.0),
        ('<answer>do(action="Tap", element=[510,310])', 0.0),  # no reasoning
        ('<think>a</think><answer>do(action="Tap", element=[1,1])</answer><answer>Back</answer>', 0.0),  # two answers
        ("<think>a</think>\n<answer>tap the wifi", 0.0),  # does not parse
        # closed by </answer>: Open-AutoGLM's runtime hands 'do(...)</answer>' to its parser, which rejects it
        ('<think>tap it</think><answer>do(action="Tap", element=[510,310])</answer>', 0.0),
    ],
)
def test_format(completion, value):
    assert reward("format", TAP, completion) == value


def test_action_type_tap_in_box_and_distance_shaping():
    inside = '<answer>do(action="Tap", element=[530,330])'
    near = '<answer>do(action="Tap", element=[500,445])'  # 105 below the box's bottom (340)
    far = '<answer>do(action="Tap", element=[999,999])'
    wrong_type = '<answer>do(action="Back")'
    assert [reward("action_type", TAP, c) for c in (inside, wrong_type)] == [1.0, 0.0]
    assert [reward("tap_in_box", TAP, c) for c in (inside, near, far)] == [1.0, 0.0, 0.0]
    assert reward("tap_distance", TAP, inside) == 1.0
    assert reward("tap_distance", TAP, near) == pytest.approx(1 - 105 / 250)
    assert reward("tap_distance", TAP, far) == 0.0 and reward("tap_distance", TAP, wrong_type) == 0.0


def test_text_match_and_swipe_direction_apply_to_their_action_only():
    typed = example('<answer>do(action="Type", text="Hello")')
    assert reward("text_match", typed, '<answer>do(action="Type", text=" hello ")') == 1.0
    assert reward("text_match", typed, '<answer>do(action="Type", text="bye")') == 0.0
    assert reward("text_match", TAP, '<answer>do(action="Type", text="Hello")') == 0.0
    up = example('<answer>do(action="Swipe", start=[500,800], end=[500,200])')
    assert reward("swipe_direction", up, '<answer>do(action="Swipe", start=[400,900], end=[450,100])') == 1.0
    assert reward("swipe_direction", up, '<answer>do(action="Swipe", start=[500,200], end=[500,800])') == 0.0
    assert reward("swipe_direction", TAP, '<answer>do(action="Swipe", start=[500,800], end=[500,200])') == 0.0
