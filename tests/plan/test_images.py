"""Screenshots in the planner: image tokens from the image processor's own resize, and the activation
bytes of a screenshot batch (vision tower + the decoder's longer sequence) against a measurement."""

import json

import pytest
from PIL import Image
from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil

from workbench.bench.activations import Case, vision_activations
from workbench.cli.main import main
from workbench.config import ConfigError
from workbench.plan import load_model_config
from workbench.plan.images import GLM41V_PREPROCESSOR, image_geometry, image_load, parse_image_size

# The vision tower's share is modelled op by op: measured within 5% (fp32 exact, bf16 autocast +2%,
# pure-bf16 with checkpointing +4%); the whole batch within the text planner's tiny-model tolerance.
VISION_TOL = 0.05
TINY_TOL = 0.20


def _processor():
    p = GLM41V_PREPROCESSOR
    return Glm4vImageProcessorPil(
        size=p["size"],
        patch_size=p["patch_size"],
        merge_size=p["merge_size"],
        temporal_patch_size=p["temporal_patch_size"],
    )


@pytest.mark.parametrize("size", ["1080x2400", "720x1600", "4000x4000", "40x60", "250x333"])
def test_image_grid_equals_the_image_processor(size):
    w, h = parse_image_size(size)
    geo = image_geometry("autoglm-phone-9b", load_model_config("autoglm-phone-9b"))
    load = image_load(geo, w, h, images_per_row=2)
    out = _processor()(images=[Image.new("RGB", (w, h), (200, 40, 90))], return_tensors="pt")
    assert tuple(out["image_grid_thw"][0].tolist()) == load.grid_thw
    assert out["pixel_values"].shape[0] == load.patches_per_image
    assert load.tokens_per_image == load.patches_per_image // 4
    assert load.tokens_per_row == 2 * (load.tokens_per_image + 2)  # begin/end-of-image markers


def test_phone_screenshot_is_3354_tokens_and_bad_sizes_are_refused():
    geo = image_geometry("autoglm-phone-9b", load_model_config("autoglm-phone-9b"))
    load = image_load(geo, 1080, 2400, 1)
    assert (load.resized_width, load.resized_height, load.grid_thw) == (1092, 2408, (1, 172, 78))
    assert load.tokens_per_image == 3354
    with pytest.raises(ConfigError, match="--image-size"):
        parse_image_size("1080 by 2400")
    with pytest.raises(ConfigError, match="--image-size"):
        image_load(geo, 10, 4000, 1)  # aspect ratio over 200 after the minimum-size upscale
    with pytest.raises(ConfigError, match="text-only"):
        image_geometry("tiny-glm4", load_model_config("tiny-glm4"))


@pytest.mark.parametrize(
    "mode,lora,ckpt",
    [
        ("bf16", True, False),
        ("bf16", True, True),
        ("fp16", True, True),
        ("fp32", False, False),
        ("bf16", False, False),
        ("pure-bf16", False, True),
    ],
)
def test_screenshot_batch_activations_match_measurement(mode, lora, ckpt):
    """One 112x224 screenshot per row, micro-batch 2, on the tiny GLM-4V built as the engine builds it (the
    measurement `python -m workbench.bench.activations --cases vision` prints)."""
    m = vision_activations(Case("tiny-glm4v", mode, lora, ckpt, batch=2, seq=40))
    assert m.seq_len == m.batch_len  # 40 text + 32 image tokens + 2 markers
    assert abs(m.predicted_vision - m.measured_vision) <= VISION_TOL * max(m.measured_vision, 1), m
    if lora and not ckpt:
        assert m.measured_vision == m.predicted_vision == 0  # a frozen tower saves nothing for backward
    assert abs(m.predicted_total - m.measured_total) <= TINY_TOL * m.measured_total, m


def test_screenshots_raise_the_plan_and_cli(capsys):
    args = [
        "plan",
        "--json",
        "--precision",
        "bf16",
        "--strategy",
        "ds-zero3",
        "--offload",
        "optimizer+params",
        "--lora",
        "--grad-ckpt",
        "on",
        "--seq-len",
        "1024",
    ]
    assert main(args) == 0
    text = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(args + ["--image-size", "1080x2400", "--images-per-row", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    row, best = out["rows"][0], out["cheapest"]["overall"]
    assert best["activations"]["images"]["tokens_per_image"] == 3354
    assert best["activations"]["seq_len"] == 1024 + 3356
    assert row["gpu"]["activations"] > text["gpu"]["activations"] and row["gpu"]["vision_activations"] > 0
    assert main(["plan", "--images-per-row", "1", "--image-size", "wide"]) == 2
    assert main(["plan", "--model", "tiny-glm4", "--images-per-row", "1"]) == 2
    assert "text-only" in capsys.readouterr().err


def test_a_model_directory_brings_its_own_processor_limits(tmp_path):
    config = load_model_config("tiny-glm4v")
    config.save_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "patch_size": 14,
                "merge_size": 2,
                "temporal_patch_size": 2,
                "size": {"shortest_edge": 3136, "longest_edge": 2 * 28 * 28 * 100},
            }
        )
    )  # at most ~100 merged tokens
    geo = image_geometry(str(tmp_path), load_model_config(str(tmp_path)))
    assert geo.source.endswith("preprocessor_config.json")
    assert image_load(geo, 1080, 2400, 1).tokens_per_image <= 100
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps({"patch_size": 16, "size": {"shortest_edge": 1, "longest_edge": 10**7}})
    )
    with pytest.raises(ConfigError, match="disagree with the model's vision config"):
        image_geometry(str(tmp_path), config)
