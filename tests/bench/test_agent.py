"""bench.agent tokens: the prompt after ten steps at 1080x2400 (docs/agent.md's figures) and what one screenshot costs
to draw and encode, printed."""
import argparse

from workbench.bench import agent as bench


def test_tokens_counts_the_latest_screenshot_only_and_times_one():
    out = bench.tokens(argparse.Namespace(size="1080x2400", steps=10))
    assert out["image_tokens_latest_screenshot"] == 3354
    assert out["total_bpe_estimate"] == 3354 + out["text_tokens_bpe_estimate"] < out["context"]
    assert out["if_every_screenshot_were_kept"] > out["context"]
    assert 0 < out["screenshot_draw_cpu_s"] < 5 and 0 < out["screenshot_png_encode_cpu_s"] < 5
