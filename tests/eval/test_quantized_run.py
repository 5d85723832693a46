"""`workbench eval` of a run trained over a quantized base (quantization.base nf4), by the same commands as a LoRA
run. Measured on the model itself (heldout_loss), its adapter's loss is its run's own eval loss, which it would not be
on the 16-bit base (what an eval that silently left the base unquantized would measure: this test fails then,
checked by breaking it)."""

from __future__ import annotations

import pytest

from workbench.eval.runner import evaluate
from workbench.events import iter_events

from ..conftest import SAMPLES, qlora_reference

HELDOUT = SAMPLES / "identity" / "heldout.jsonl"


def test_the_heldout_loss_of_a_qlora_run_is_its_own_eval_loss(qlora_run):
    from workbench.eval.loss import HeldoutLossTask

    trained = [e.loss for e in iter_events(qlora_run / "events.jsonl") if getattr(e, "type", None) == "eval"][-1]
    report = evaluate("heldout_loss", runs=[qlora_run], progress=False, write=False)
    assert report.metrics["qlora"]["default"]["loss"] == pytest.approx(trained, rel=1e-6)
    unquantized, tok = qlora_reference(qlora_run, quantized=False)
    on_16_bit = HeldoutLossTask().measure(unquantized, tok, HELDOUT, max_length=128, batch_size=4)["loss"]
    # the near-uniform tiny model's loss moves by 1.8e-5 of itself (measured) between the nf4 and the bf16 base: 18
    # times the tolerance above
    assert abs(on_16_bit - trained) > 1e-5 * trained, (on_16_bit, trained)
