"""Assistant-only labels, and the per-message weight: a turn of weight 0 is context, not a target."""

import re

import pytest

from workbench.data.formats import row_to_messages, without_weights
from workbench.data.tokenize import IGNORE_INDEX, tokenize_messages
from workbench.models.tiny import byte_tokenizer


def _trained_text(tok, example) -> str:
    return tok.decode([t for t, label in zip(example.input_ids, example.labels) if label != IGNORE_INDEX])


def test_weight_zero_turns_are_context_and_the_weighted_one_is_the_target():
    tok = byte_tokenizer()
    row = {
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "EARLIER", "weight": 0},
            {"role": "user", "content": "second"},
            {"role": "assistant", "content": "LATEST", "weight": 1},
        ]
    }
    example = tokenize_messages(tok, row_to_messages(row), 512)
    trained = _trained_text(tok, example)
    assert "LATEST" in trained and "EARLIER" not in trained
    assert "EARLIER" in tok.decode(example.input_ids)  # still in the context the model reads
    # without weights every assistant turn is trained (the default)
    plain = tokenize_messages(tok, without_weights(row_to_messages(row)), 512)
    assert "EARLIER" in _trained_text(tok, plain) and "LATEST" in _trained_text(tok, plain)


@pytest.mark.parametrize(
    "message, why",
    [
        ({"role": "user", "content": "q", "weight": 0}, "messages[0].weight: only assistant messages carry a weight"),
        ({"role": "assistant", "content": "a", "weight": 2}, "messages[0].weight must be 0 (context, no loss) or 1"),
        ({"role": "assistant", "content": "a", "weight": True}, "messages[0].weight must be 0"),
    ],
)
def test_a_bad_weight_names_the_field_and_the_fix(message, why):
    rows = [message] + ([{"role": "assistant", "content": "a"}] if message["role"] == "user" else [])
    with pytest.raises(ValueError, match=re.escape(why)):
        row_to_messages({"messages": rows})


def test_a_row_whose_every_answer_has_weight_zero_has_nothing_to_train():
    with pytest.raises(ValueError, match="every assistant message has weight 0"):
        row_to_messages(
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 0}]}
        )
