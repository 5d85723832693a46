"""The one held-out loss: sharded over ranks it sums to the unsharded figure, and screenshot rows reach the model."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from PIL import Image

from tests.conftest import SAMPLES
from workbench.config import ModelSection
from workbench.forward import collated, heldout_loss, load_heldout
from workbench.models import load_base_model


@pytest.fixture(scope="module")
def tiny_glm4v():
    return load_base_model(ModelSection(source="tiny-glm4v"), torch.float32)


def test_sharded_heldout_loss_sums_to_the_unsharded_one(tiny_glm4v):
    """Each rank's share (its slice, padded with repeated forwards it discards) summed over ranks is the one-process
    loss: what the engine's eval reduces with DistContext.sum."""
    m = tiny_glm4v
    examples = load_heldout(SAMPLES / "identity" / "heldout.jsonl", m.tokenizer, 128, m.processor)
    pad = m.tokenizer.pad_token_id
    whole = heldout_loss(m.model, examples, pad, batch_size=4)
    shares = [heldout_loss(m.model, examples, pad, batch_size=4, rank=r, world_size=3) for r in range(3)]
    assert sum(s.tokens for s in shares) == whole.tokens == sum(e.target_tokens for e in examples)
    summed = [sum(s.total for s in shares), sum(s.tokens for s in shares)]
    reduced = heldout_loss(m.model, examples, pad, batch_size=4, rank=1, world_size=3, reduce=lambda _: summed)
    assert reduced.loss == pytest.approx(whole.loss, rel=1e-6) and reduced.tokens == whole.tokens


def test_screenshot_rows_give_the_model_their_pixels(tiny_glm4v):
    """The held-out loss of screenshot rows depends on the screenshots: the batches carry pixel values and grids
    (without the processor such rows cannot be loaded at all)."""
    m = tiny_glm4v
    m.model.train()
    examples = load_heldout(SAMPLES / "phone_screens" / "heldout.jsonl", m.tokenizer, 512, m.processor, limit=4)
    assert {"pixel_values", "image_grid_thw"} <= set(collated(examples, m.tokenizer.pad_token_id, 4)[0])
    measured = heldout_loss(m.model, examples, m.tokenizer.pad_token_id, batch_size=4)
    assert m.model.training  # eval mode only while measuring
    # the same rows with every screenshot replaced by a black one of the same size
    blank = [
        dataclasses.replace(
            e, vision=dataclasses.replace(e.vision, images=tuple(Image.new("RGB", im.size) for im in e.vision.images))
        )
        for e in examples
    ]
    assert heldout_loss(m.model, blank, m.tokenizer.pad_token_id, batch_size=4).loss != pytest.approx(
        measured.loss, rel=1e-4
    )
