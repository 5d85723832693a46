"""The loss-head benchmark's contenders measure what they say, on a tiny model (the real figures: docs/precision.md)."""

from __future__ import annotations

import argparse

import pytest

from workbench.bench import loss_head


def _args(**kw):
    base = dict(
        model="tiny-glm4",
        precision="fp32",
        steps=1,
        prompt_tokens=96,
        label_tokens=8,
        chunk_tokens=4,
        threads=1,
        device="cpu",
    )
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture(scope="module")
def results():
    return {name: loss_head.run_contender(name, _args()) for name in ("full", "labels", "chunked", "trl")}


def test_the_heads_keep_less_than_the_full_head(results):
    full, labels, chunked = (results[n]["saved_bytes"] for n in ("full", "labels", "chunked"))
    # tiny-glm4: 320-token vocabulary, 64 hidden; the full head keeps fp32 log-softmax for 103 positions, the
    # labels head for 8, the chunked head none (only 8 hidden states)
    assert chunked < labels < full
    # labels keeps the 8 positions' fp32 log-softmax and nll's total_weight; chunked their fp32 hidden states instead
    assert labels - chunked == 8 * 320 * 4 + 4 - 8 * 64 * 4
    for r in results.values():
        assert r["steps_per_s"] > 0 and r["rss_before"] > 0


def test_trl_trains_the_same_row_and_its_forward_is_measured(results):
    trl = results["trl"]
    assert trl["saved_bytes"] > results["chunked"]["saved_bytes"] and trl["steps_per_s"] > 0


def test_report_prints_ratios_and_skips():
    rows = [
        {"contender": n, "saved_bytes": b, "steps_per_s": s, "rss_peak": 3 << 20, "rss_rise": r, "rss_before": 1}
        for n, b, s, r in (("full", 400, 1.0, 200), ("chunked", 100, 2.0, 50), ("trl", 200, 0.5, 100))
    ]
    text = loss_head.format_results(rows, {"liger": "needs CUDA"})
    assert "chunked / full: saved tensors 0.250, RSS rise 0.250, steps/s 2.000" in text
    assert "chunked / trl: saved tensors 0.500, RSS rise 0.500, steps/s 4.000" in text
    assert "liger: skipped (needs CUDA)" in text


def test_liger_is_an_option_only_with_cuda(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert "needs CUDA" in loss_head.available("liger")
    assert loss_head.available("chunked") is None
