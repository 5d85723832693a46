"""The rows scorer: prompts from a JSONL file's rows, rewards per name, parse flags, errors naming reward and row."""

import pytest

from tests.conftest import SAMPLES
from workbench.config import load_config
from workbench.rewards import RewardError, RowsScorer, register_reward, scorer_for, unregister_reward

ROWS = str(SAMPLES / "phone_actions_reasoning" / "train.jsonl")


def test_rows_become_prompts_and_completions_are_scored_per_reward():
    s = RowsScorer(ROWS, ["format", "action_type"])
    assert len(s.prompts) == 111 and s.prompts[0].messages[-1]["role"] == "user"
    good = s.prompts[0].reference  # the reference answer itself scores full marks
    scored = s([s.prompts[0], s.prompts[0]], [good, "no idea"])
    assert scored.rewards == {"format": [1.0, 0.0], "action_type": [1.0, 0.0]} and scored.parsed == [True, False]
    assert "微信" in s.describe(s.prompts[0]) and s.thumbnail(s.prompts[0]) is None  # a text row has no image


def test_a_raising_reward_names_itself_and_the_row():
    register_reward("explodes", lambda e, c, v: 1 / 0)
    try:
        s = RowsScorer(ROWS, ["explodes"])
        with pytest.raises(RewardError, match=r"reward 'explodes' raised on row 3 of .*train.jsonl: ZeroDivisionError"):
            s([s.prompts[2]], ["x"])
    finally:
        unregister_reward("explodes")


def test_sft_runs_get_no_scorer():
    assert scorer_for(load_config(None, {})) is None
    assert scorer_for(load_config(None, {"training.method": "grpo", "data.train": ROWS, "lora.dropout": 0})) is not None
