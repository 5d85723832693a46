"""Messages with images -> model inputs (workbench.data.multimodal) on the tiny GLM-4V and its offline processor."""

import base64
import io

import pytest
import torch
from PIL import Image

from workbench.data import IGNORE_INDEX, collate, model_inputs
from workbench.data.multimodal import content_parts, count_image_tokens, encode_chat, vision_batch
from workbench.image_io import ImageSourceError, load_image, resolve_images
from workbench.models import load_for_inference
from workbench.models.processor import GLM4V_CHAT_TEMPLATE, image_token_count, keeps_reasoning

ANSWER = '<think>The OK button is at the bottom.</think><answer>do(action="Tap", element=[500,880])</answer>'


@pytest.fixture(scope="module")
def tiny():
    return load_for_inference("tiny-glm4v")


def png_data_url(size=(112, 252), color=(10, 200, 30), fmt="PNG") -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def screenshot_chat(url: str, task: str = "Tap OK") -> list[dict]:
    return [
        {
            "role": "user",
            "content": content_parts(
                [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": task}]
            ),
        },
        {"role": "assistant", "content": ANSWER},
    ]


def test_offline_processor_and_template(tiny):
    p = tiny.processor
    assert type(p).__name__ == "ImageOnlyGlm4vProcessor" and p.chat_template == GLM4V_CHAT_TEMPLATE
    assert p.image_token_id == tiny.model.config.image_token_id
    assert keeps_reasoning(p.tokenizer, p.chat_template)
    # GLM-4.1V-Thinking's stock behaviour (reasoning dropped from assistant turns) is detected
    dropping = GLM4V_CHAT_TEMPLATE.replace("{{ m['content'] }}", "{{ m['content'].split('</think>')[-1] }}")
    assert not keeps_reasoning(p.tokenizer, dropping)
    # 112x252 is 4x9 merged patches; 1080x2400 follows GLM-4.1V's resize rules (multiples of 28)
    assert image_token_count(p, 112, 252) == 36
    assert image_token_count(p, 1080, 2400) == (2408 // 28) * (1092 // 28)


def test_labels_token_by_token_image_and_prompt_are_context_reasoning_is_target(tiny):
    p, tok = tiny.processor, tiny.tokenizer
    ex = encode_chat(p, resolve_images(screenshot_chat(png_data_url())), max_length=512)
    ids, labels = ex.input_ids, ex.labels
    assert count_image_tokens(ex) == 36 == sum(1 for t in ids if t == p.image_token_id)
    answer_start = len(ids) - len(tok(ANSWER, add_special_tokens=False)["input_ids"]) - 1  # + the trained EOS
    for i, (t, lb) in enumerate(zip(ids, labels)):
        if i < answer_start:
            assert lb == IGNORE_INDEX, (i, tok.decode([t]))  # image, markup and task tokens are context
        else:
            assert lb == t, (i, tok.decode([t]))
    assert tok.decode(ids[:answer_start]).endswith("Tap OK<|assistant|>\n")
    assert tok.decode(labels[answer_start:]) == ANSWER + "<|endoftext|>"  # <think> included


def test_generation_prompt_and_batch_of_different_sizes_runs_the_model(tiny):
    p = tiny.processor
    a = encode_chat(p, resolve_images(screenshot_chat(png_data_url((112, 252)))), 512)
    b = encode_chat(p, resolve_images(screenshot_chat(png_data_url((224, 476), (200, 10, 10)))), 512)
    text = encode_chat(p, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], 512)
    batch = collate([a, text, b], tiny.tokenizer.pad_token_id)
    assert batch["image_grid_thw"].tolist() == [[1, 18, 8], [1, 34, 16]]
    assert batch["pixel_values"].shape[0] == 18 * 8 + 34 * 16
    assert batch["mm_token_type_ids"].sum(1).tolist() == [36, 0, 136]
    logits = tiny.model(**model_inputs(batch)).logits
    assert logits.shape[:2] == batch["input_ids"].shape and torch.isfinite(logits).all()
    prompt = encode_chat(p, resolve_images(screenshot_chat(png_data_url())[:1]), add_generation_prompt=True)
    assert all(lb == IGNORE_INDEX for lb in prompt.labels)
    assert tiny.tokenizer.decode(prompt.input_ids).endswith("<|end_of_image|>Tap OK<|assistant|>\n")
    ids = torch.tensor([prompt.input_ids])
    extra = vision_batch(ids, [prompt.vision])
    out = tiny.model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), **extra, max_new_tokens=3, do_sample=False
    )
    assert out.shape[1] == ids.shape[1] + 3


@pytest.mark.parametrize(
    "url,reason",
    [
        ("http://example.com/a.png", "remote image URLs are not fetched"),
        ("https://example.com/a.png", "remote image URLs are not fetched"),
        ("ftp://example.com/a.png", "unsupported image URL scheme 'ftp'"),
        ("data:image/png;base64,@@@", "not valid base64"),
        ("data:text/plain;base64,aGk=", "is not an image"),
        ("data:image/png,rawbytes", "must be base64"),
        ("data:image/png;base64," + base64.b64encode(b"not a png").decode(), "not an image PIL can read"),
        ("missing.png", "image file not found"),
        ("", "non-empty string"),
    ],
)
def test_bad_image_sources_are_refused_with_the_reason(tmp_path, url, reason, monkeypatch):
    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("an image URL was fetched"))
    with pytest.raises(ImageSourceError, match=reason):
        load_image(url, base_dir=tmp_path)


def test_local_files_relative_to_base_dir_and_refused_when_not_allowed(tmp_path):
    Image.new("RGB", (30, 40)).save(tmp_path / "s.png")
    assert load_image("s.png", base_dir=tmp_path).size == (30, 40)
    with pytest.raises(ImageSourceError, match="local image paths are not accepted"):
        load_image(str(tmp_path / "s.png"), allow_local_files=False)
    assert load_image(png_data_url(), allow_local_files=False).size == (112, 252)


# ---- rows with images in JSONL files: each bad one is file:line and the reason ------------------------------
def image_row(content, answer=ANSWER, **extra) -> str:
    import json

    return json.dumps(
        {"messages": [{"role": "user", "content": content}, {"role": "assistant", "content": answer}], **extra}
    )


def parts(url, text="Tap OK"):
    return [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]


BAD_IMAGE_ROWS = [
    (image_row(parts("missing.png")), "image 1: image file not found"),
    (image_row(parts("notes.txt")), "image 1: cannot read the image"),
    (image_row(parts("screens")), "image file is a directory"),
    (image_row(parts("http://example.com/a.png")), "remote image URLs are not fetched"),
    (image_row(parts("data:image/png;base64,!!")), "not valid base64"),
    (image_row(parts("ok.png") + [{"type": "audio", "audio": "x"}]), "messages[0].content[2].type is 'audio'"),
    (
        image_row([{"type": "image_url", "image_url": {}}]),
        "messages[0].content[0].image_url.url must be a non-empty string",
    ),
    (
        image_row("<image> and <image> Tap OK", images=["ok.png"]),
        "more <image> placeholders than images: 2 placeholder(s) for 1",
    ),
    (image_row("Tap OK", images=["ok.png"]), "fewer <image> placeholders than images"),
    (image_row("<image>Tap OK", images="ok.png"), "'images' must be a list of image paths"),
    (
        image_row("<image>Tap OK", images=["big.png"]),
        "image 1 (1080x2400) is 3354 tokens alone, more than data.max_length=512",
    ),
    (image_row(parts("long.png")), "truncation would cut its image tokens"),
    (image_row(parts("thin.png")), "image 1 (6000x28) cannot be used"),
    (
        image_row("Tap OK", answer="<image>", images=["ok.png"]),
        "holds an <image> placeholder; images go in user messages",
    ),
]


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    Image.new("RGB", (112, 252), (9, 9, 9)).save(d / "ok.png")
    Image.new("RGB", (1080, 2400), (9, 9, 9)).save(d / "big.png")
    Image.new("RGB", (1000, 1000), (9, 9, 9)).save(d / "long.png")  # 1296 tokens: fits 512? no: cut by the text budget
    Image.new("RGB", (6000, 28), (9, 9, 9)).save(d / "thin.png")
    (d / "notes.txt").write_text("not an image")
    (d / "screens").mkdir()
    return d


@pytest.mark.parametrize("line,reason", BAD_IMAGE_ROWS, ids=[r for _, r in BAD_IMAGE_ROWS])
def test_bad_image_rows_stop_with_file_line_and_reason(tiny, image_dir, line, reason):
    from tests.conftest import write_jsonl
    from workbench.data import DataError, load_training_examples

    good = image_row(parts("ok.png"))
    path = write_jsonl(image_dir / f"d{abs(hash(line))}.jsonl", [good, line, good])
    max_length = 1300 if "long.png" in line else 512
    with pytest.raises(DataError) as exc:
        load_training_examples(path, tiny.tokenizer, max_length, processor=tiny.processor)
    assert str(exc.value).startswith(f"{path}:2: ") and reason in str(exc.value), str(exc.value)


def test_image_rows_on_a_text_model_and_both_row_forms(tiny, image_dir):
    from tests.conftest import write_jsonl
    from workbench.data import DataError, load_training_examples

    path = write_jsonl(
        image_dir / "forms.jsonl", [image_row(parts("ok.png")), image_row("<image>Tap OK", images=["ok.png"])]
    )
    with pytest.raises(DataError, match=r"forms.jsonl:1: the row holds images, but the model is text-only"):
        load_training_examples(path, tiny.tokenizer, 512)
    (a, b), stats = load_training_examples(path, tiny.tokenizer, 512, processor=tiny.processor)
    assert a.input_ids == b.input_ids and a.labels == b.labels  # the shortcut is the same conversation
    assert stats.images == 2 and stats.image_tokens == 72


def test_the_phone_screens_samples_load_and_check():
    import subprocess
    import sys

    from tests.conftest import SAMPLES

    res = subprocess.run(
        [sys.executable, str(SAMPLES / "make_phone_screens.py"), "--check"], capture_output=True, text=True
    )
    assert res.returncode == 0 and res.stdout.strip().endswith("phone_screens: ok"), res.stderr


def test_inline_images_reads_each_file_once_and_sends_it_as_a_data_url(tmp_path):
    from workbench.image_io import ImageSourceError, image_data_url, inline_images, load_image

    Image.new("RGB", (8, 6), "red").save(tmp_path / "a.png")
    part = {"type": "image_url", "image_url": {"url": "a.png"}}
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": [part, {"type": "text", "text": "t"}]}]
    cache: dict = {}
    first, second = inline_images(messages, tmp_path, cache), inline_images(messages, tmp_path, cache)
    url = first[1]["content"][0]["image_url"]["url"]
    assert url == image_data_url(tmp_path / "a.png") and url.startswith("data:image/png;base64,")
    assert load_image(url, allow_local_files=False).size == (8, 6)  # what a server with safe defaults accepts
    assert second[1]["content"][0]["image_url"]["url"] is url and len(cache) == 1  # one string per screenshot
    assert first[0] == messages[0] and first[1]["content"][1] == {"type": "text", "text": "t"}
    assert messages[1]["content"][0]["image_url"]["url"] == "a.png"  # the rows themselves are left as read
    assert inline_images(first) == first  # data: URLs stay as they are
    with pytest.raises(ImageSourceError, match="image 1: image file not found"):
        inline_images(messages, tmp_path / "elsewhere")
