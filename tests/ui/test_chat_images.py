"""The chat compare panel's image picker: upload or a sample screenshot, a thumbnail, the image sent to every
compared model (no browser: the widgets are driven from Python)."""

from __future__ import annotations

import datetime
import io

import pytest

from tests.conftest import SAMPLES

MODEL = "tiny-glm4v"
SCREEN = SAMPLES / "phone_screens" / "images" / "home_01.png"


def png_bytes(size=(40, 30)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def test_picker_shows_a_sample_or_an_upload_and_refuses_what_is_no_image():
    from PIL import Image

    from workbench.ui.chat_panel import NO_SAMPLE, ImagePicker

    picker = ImagePicker()
    assert "home_01.png" in picker.sample.options and picker.data_urls() == []
    picker.sample.value = "home_01.png"  # as a click on the dropdown does
    assert picker.image.name == "home_01.png" and (picker.image.width, picker.image.height) == (112, 252)
    assert picker.data_urls() == [picker.image.data_url] and picker.image.data_url.startswith("data:image/png;base64,")
    thumb = Image.open(io.BytesIO(picker.thumbnail.value))
    assert max(thumb.size) <= 160 and picker.thumbnail.layout.display is None and "112x252" in picker.status.value

    picker.upload.value = (
        {
            "name": "shot.png",
            "type": "image/png",
            "size": 10,
            "content": memoryview(png_bytes()),
            "last_modified": datetime.datetime(2026, 11, 30, tzinfo=datetime.timezone.utc),
        },
    )
    assert picker.image.name == "shot.png" and (picker.image.width, picker.image.height) == (40, 30)
    assert picker.sample.value == NO_SAMPLE and picker.data_urls() == [picker.image.data_url]

    picker.use_upload("notes.png", b"not an image at all")
    assert picker.image is None and picker.data_urls() == [] and picker.thumbnail.layout.display == "none"
    assert "notes.png" in picker.status.value and "not an image" in picker.status.value

    picker.choose_sample("settings_00.png")
    assert picker.sample.value == "settings_00.png" and picker.image.name == "settings_00.png"
    picker.clear_button.click()
    assert picker.image is None and picker.sample.value == NO_SAMPLE


def test_picked_screenshot_goes_to_every_compared_model(tmp_path):
    """Base and adapter answer the prompt with the screenshot: each column is what the openai client gets for
    the same image request (greedy), and the reasoning block shows only where there is reasoning."""
    from tests.serve.helpers import make_adapter
    from workbench.serve import start_server
    from workbench.serve.client import ChatReply, compare, image_data_url
    from workbench.ui.chat_panel import AnswerColumn, ChatComparePanel

    run = make_adapter(MODEL, tmp_path / "tuned", seed=1)
    prompt = "Task: Open Mail\nWhat is the next action?"
    with start_server(MODEL, runs=[str(run)], threads=1) as srv:
        panel = ChatComparePanel(server=srv, max_tokens=6)
        assert set(panel.models.value) == {MODEL, "tuned"}
        panel.image_picker.choose_sample("home_01.png")
        panel.prompt.value = prompt
        replies = panel.ask()  # no event loop here: answers synchronously
        client = srv.openai_client(max_retries=0)
        image_parts = [
            {"type": "image_url", "image_url": {"url": image_data_url(SCREEN)}},
            {"type": "text", "text": prompt},
        ]
        for model in (MODEL, "tuned"):
            with_image = (
                client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": image_parts}], max_tokens=6, temperature=0
                )
                .choices[0]
                .message
            )
            text_only = (
                client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": prompt}], max_tokens=6, temperature=0
                )
                .choices[0]
                .message
            )
            reply = replies[model]
            assert not reply.error, reply.error
            assert (reply.content, reply.reasoning or None) == (
                with_image.content,
                getattr(with_image, "reasoning_content", None),
            )
            assert (text_only.content, getattr(text_only, "reasoning_content", None)) != (
                with_image.content,
                getattr(with_image, "reasoning_content", None),
            )
        helper = compare(prompt, models=[MODEL, "tuned"], images=[SCREEN], server=srv, show=False, max_tokens=6)
        assert {m: (r.content, r.error) for m, r in helper.items()} == {
            m: (r.content, None) for m, r in replies.items()
        }
        for column in panel.answers.children:
            assert column.reasoning_box.layout.display == (None if replies[column.model].reasoning else "none")
    column = AnswerColumn(MODEL)
    column.show(ChatReply(MODEL, content='do(action="Tap")', reasoning="The Mail icon is on the screen."), done=True)
    assert column.reasoning_box.layout.display is None and "Mail icon" in column.reasoning.value


@pytest.mark.parametrize("images", [["a.png"], "a.png"])
def test_prompt_messages_carry_the_images_as_data_urls(tmp_path, images):
    from workbench.serve.remote import prompt_messages

    (tmp_path / "a.png").write_bytes(png_bytes())
    paths = [tmp_path / i for i in images] if isinstance(images, list) else tmp_path / images
    [message] = prompt_messages("what now?", None, paths)
    content = message["content"]
    assert message["role"] == "user" and content[-1] == {"type": "text", "text": "what now?"}
    assert content[0]["type"] == "image_url" and content[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert prompt_messages("what now?", "Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "what now?"},
    ]
