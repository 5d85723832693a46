"""Training the tiny GLM-4V on screenshot rows: batches carry pixel_values / image_grid_thw, the vision tower stays
frozen (and fp32 under fp16), accumulation stays token-normalised with images of different sizes."""

import json

import pytest
import torch
from PIL import Image, ImageDraw

from tests.conftest import SAMPLES
from workbench import train
from workbench.events import iter_events

SCREENS = SAMPLES / "phone_screens"


def events_of(result, kind):
    return [e for e in iter_events(result.run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


def sample_rows(path, count: int, step: int = 22):
    """``count`` rows of the phone_screens training set (every ``step``-th: all kinds of screen), with absolute image paths."""
    rows = [json.loads(line) for line in (SCREENS / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    picked = rows[::step][:count]
    for row in picked:
        part = row["messages"][0]["content"][0]["image_url"]
        part["url"] = str(SCREENS / part["url"])
    path.write_text("".join(json.dumps(r) + "\n" for r in picked), encoding="utf-8")
    return path


def vision_overrides(train_path, **extra):
    return {
        "model.source": "tiny-glm4v",
        "data.train": str(train_path),
        "data.max_length": 512,
        "lora.dropout": 0.0,
        "schedule.learning_rate": 1e-2,
        **extra,
    }


@pytest.mark.parametrize("mode,vision_dtype", [("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float32")])
def test_loss_falls_with_screenshots_and_the_vision_tower_stays_frozen(make_cfg, tmp_path, mode, vision_dtype):
    """fp16: the family rule keeps the tower in fp32; bf16 stores the frozen base (tower included) in bf16."""
    cfg = make_cfg(
        **vision_overrides(
            sample_rows(tmp_path / "rows.jsonl", 4),
            **{
                "precision.mode": mode,
                "schedule.max_steps": 5,
                "schedule.micro_batch_size": 4,
                "diagnosis.coverage_every": 0,
            },
        )
    )
    r = train(cfg)
    # the same 4 rows every step (micro-batch 4): the loss falls at every step, ~0.27 nats in 5 (measured, each mode)
    assert all(b < a for a, b in zip(r.losses, r.losses[1:])) and r.losses[0] - r.losses[-1] > 0.2, r.losses
    assert r.skipped_steps == 0
    started = events_of(r, "run_started")[0]
    assert started.data["train"]["images"] == 4 and started.data["train"]["image_tokens"] == 4 * 36
    for census in events_of(r, "census"):  # at the start and at the end
        vision = [row for row in census.rows if row["group"] == "vision"]
        assert vision and all(not row["trainable"] and row["dtype"] == vision_dtype for row in vision), vision
        assert sum(row["count"] for row in vision) > 0
        assert any(row["group"] == "lora" and row["trainable"] for row in census.rows)
    memory = events_of(r, "memory")
    assert memory and memory[-1].optimizer_bytes > 0


def _screens_of_different_sizes(tmp_path):
    """Four rows whose screenshots have four sizes (so four image-token counts and pixel grids)."""
    rows = []
    for k, size in enumerate([(112, 252), (224, 476), (168, 336), (56, 112)]):
        img = Image.new("RGB", size, (240, 240, 240))
        ImageDraw.Draw(img).rectangle([size[0] // 4, size[1] // 3, size[0] // 2, size[1] // 2], fill=(30 * k, 90, 200))
        img.save(tmp_path / f"s{k}.png")
        rows.append(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": f"s{k}.png"}},
                            {"type": "text", "text": "Tap the blue button" + "!" * k},
                        ],
                    },
                    {
                        "role": "assistant",
                        "content": f'<think>It is there.</think><answer>do(action="Tap", element=[{300 + k},400])</answer>',
                    },
                ]
            }
        )
    path = tmp_path / "sizes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_accumulation_2x2_equals_4x1_with_screenshots_of_different_sizes(make_cfg, tmp_path):
    from safetensors.torch import load_file

    common = vision_overrides(
        _screens_of_different_sizes(tmp_path),
        **{"schedule.max_steps": 2, "precision.max_grad_norm": None, "diagnosis.enabled": False},
    )
    a = train(
        make_cfg(**common, **{"schedule.micro_batch_size": 4, "schedule.grad_accum_steps": 1, "output.run_name": "mb4"})
    )
    b = train(
        make_cfg(
            **common, **{"schedule.micro_batch_size": 2, "schedule.grad_accum_steps": 2, "output.run_name": "mb2x2"}
        )
    )
    # Tolerance: fp32 sums in another order (padding widths and image batches differ between the splits): losses
    # to 1e-5 relative; trained weights (~1e-2) to 1e-5 absolute, as Adam's division by sqrt(v) magnifies the
    # difference of a near-zero gradient element (measured: 1 of 4096 elements 3.6e-6 apart, the rest < 1e-6).
    torch.testing.assert_close(torch.tensor(a.losses), torch.tensor(b.losses), rtol=1e-5, atol=1e-6)
    wa, wb = (load_file(str(r.run_dir / "adapter" / "adapter_model.safetensors")) for r in (a, b))
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5)


APPS = ["Maps", "Clock", "WeChat", "Notes", "Phone", "Books", "Video", "Food"]


def _eight_screens(tmp_path):
    """Eight screenshots (a differently coloured button in a different place on each) with a task each, and
    the AutoGLM-format answer to learn: the app named in the task, and the button's position."""
    rows = []
    for k, app in enumerate(APPS):
        img = Image.new("RGB", (112, 112), (245, 245, 247))
        ImageDraw.Draw(img).rectangle([4 + 13 * k, 40, 16 + 13 * k, 72], fill=(30 * k, 255 - 30 * k, 120))
        img.save(tmp_path / f"button{k}.png")
        rows.append(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": f"button{k}.png"}},
                            {"type": "text", "text": f"Open {app}"},
                        ],
                    },
                    {
                        "role": "assistant",
                        "content": f'<think>Tap {app}.</think><answer>do(action="Tap", element=[{k + 1}47,500])</answer>',
                    },
                ]
            }
        )
    path = tmp_path / "eight.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


# ~200 optimizer steps of the tiny model: 11 s on 2 free cores (several minutes on a shared machine)
def test_tiny_glm4v_overfits_eight_screenshot_rows_and_greedy_reproduces_them(make_cfg, tmp_path):
    """The path learns, not just runs: after training on eight screenshot rows, greedy decoding with the screenshot
    reproduces each answer exactly (reasoning, tags and coordinates). Full fine-tuning, as a random tiny model
    memorises faster that way than through LoRA."""
    from workbench.data.formats import row_to_messages
    from workbench.forward.generate import greedy_replies
    from workbench.image_io import resolve_images
    from workbench.models import load_for_inference

    path, rows = _eight_screens(tmp_path)
    r = train(
        make_cfg(
            **vision_overrides(
                path,
                **{
                    "lora.enabled": False,
                    "schedule.max_steps": 200,
                    "schedule.micro_batch_size": 8,
                    "schedule.min_lr_ratio": 0.05,
                    "diagnosis.enabled": False,
                },
            )
        )
    )
    loaded = load_for_inference("tiny-glm4v")
    from transformers import Glm4vForConditionalGeneration

    model = Glm4vForConditionalGeneration.from_pretrained(str(r.run_dir / "model")).eval()
    conversations = [resolve_images(row_to_messages(row)[:1], tmp_path) for row in rows]
    # all eight in one left-padded batch, their screenshots in one pixel batch
    answers = greedy_replies(model, loaded.tokenizer, conversations, 80, processor=loaded.processor)
    assert answers == [row["messages"][1]["content"] for row in rows]


def test_fp16_overflows_on_screenshot_rows_are_attributed_and_coverage_sees_the_fp32_tower(make_cfg, tmp_path):
    """Overflow attribution on screenshot rows traces each skipped step to a module (the replay gets every captured
    input: the next test), and the coverage sample counts the vision tower's matmuls in fp32."""
    r = train(
        make_cfg(
            **vision_overrides(
                sample_rows(tmp_path / "rows.jsonl", 4),
                **{
                    "precision.mode": "fp16",
                    "precision.init_scale": 2.0**24,
                    "schedule.max_steps": 3,
                    "schedule.micro_batch_size": 2,
                    "schedule.grad_accum_steps": 2,
                    "diagnosis.attribute_overflows": 10,
                    "diagnosis.coverage_every": 1,
                },
            )
        )
    )
    origins = events_of(r, "overflow_origin")
    assert r.skipped_steps >= 1 and len(origins) == r.skipped_steps
    assert all(o.phase in ("forward", "backward") and o.module for o in origins), origins
    vision = events_of(r, "coverage")[0].groups["vision"]
    assert vision["flops"] > 0 and set(vision["dtypes"]) == {"float32"}


def test_the_overflow_capture_keeps_every_model_input_for_the_replay(tmp_path):
    from workbench.data import collate, load_training_examples, model_inputs
    from workbench.diagnosis import BatchCapture
    from workbench.models import load_for_inference

    loaded = load_for_inference("tiny-glm4v")
    examples, _ = load_training_examples(
        sample_rows(tmp_path / "rows.jsonl", 2), loaded.tokenizer, 512, processor=loaded.processor
    )
    batch = model_inputs(collate(examples, loaded.tokenizer.pad_token_id))
    model = loaded.model.train()
    capture = BatchCapture(model)
    model(**batch)
    capture.remove()
    assert capture.window[0]["inputs"].keys() == batch.keys()  # pixel values, grids and token types included
    assert all(capture.window[0]["inputs"][k] is v for k, v in batch.items())


def test_model_directories_of_a_glm4v_run_load_alone_with_plain_transformers(make_cfg, tmp_path):
    """runs/NAME/model/ (full fine-tune) and merged/ (LoRA, merge_adapter): weights, tokenizer, chat template and the
    processor files; model/ loaded and run on a screenshot in a fresh process that never imports the workbench."""
    from tests.models.load_alone import loaded_alone

    rows = sample_rows(tmp_path / "rows.jsonl", 2)
    full = train(
        make_cfg(
            **vision_overrides(
                rows,
                **{
                    "lora.enabled": False,
                    "schedule.max_steps": 1,
                    "schedule.micro_batch_size": 2,
                    "diagnosis.enabled": False,
                },
            )
        )
    )
    lora = train(
        make_cfg(
            **vision_overrides(
                rows,
                **{
                    "checkpointing.merge_adapter": True,
                    "schedule.max_steps": 1,
                    "schedule.micro_batch_size": 2,
                    "diagnosis.enabled": False,
                    "output.run_name": "merged",
                },
            )
        )
    )
    model_dir, merged_dir = full.run_dir / "model", lora.run_dir / "merged"
    config = json.loads((model_dir / "processor_config.json").read_text())
    assert config["processor_class"] == "Glm4vProcessor" and config["image_processor"]["patch_size"] == 14
    for name in ("processor_config.json", "preprocessor_config.json", "chat_template.jinja", "tokenizer.json"):
        assert (merged_dir / name).read_bytes() == (model_dir / name).read_bytes(), name  # one writer for both
    got = loaded_alone(model_dir)
    assert not got["workbench_imported"] and got["patch_size"] == 14 and got["finite"]
    assert got["prompt"].startswith("[gMASK]<sop><|user|>\n<|begin_of_image|>") and got["image_tokens"] == 32
    assert got["logits_shape"][1] > got["image_tokens"]
    # the stock processor where torchvision imports; here (no torchvision beside the CPU torch) it says so
    assert got.get("processor") == "Glm4vProcessor" or "Torchvision" in got["processor_error"], got
