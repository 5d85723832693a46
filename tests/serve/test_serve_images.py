"""Image parts in chat requests on the tiny GLM-4.1V model: the openai client and langchain-openai unchanged,
image tokens in usage and in the context check, greedy output equal to ``model.generate`` on the same processor
inputs (the server's prefill inputs and rotary positions), and every bad image request a 400 in OpenAI's shape."""

from __future__ import annotations

import base64
import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import torch

from tests.conftest import SAMPLES

MODEL = "tiny-glm4v"
SCREEN = SAMPLES / "phone_screens" / "images" / "home_01.png"
OTHER_SCREEN = SAMPLES / "phone_screens" / "images" / "settings_00.png"
ERROR_KEYS = {"message", "type", "param", "code"}


def png_data_url(path=None, size=None, color=(40, 90, 200)) -> str:
    """A base64 data: URL of a sample screenshot, or of a plain PNG of ``size``."""
    if path is not None:
        data = path.read_bytes()
    else:
        from PIL import Image

        buf = io.BytesIO()
        Image.new("RGB", size, color).save(buf, format="PNG")
        data = buf.getvalue()
    return "data:image/png;base64," + base64.b64encode(data).decode()


def image_message(url: str, text: str = "Task: Open Mail\nWhat is the next action?") -> list[dict]:
    return [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]}
    ]


@pytest.fixture(scope="module")
def vision_server():
    from workbench.serve import start_server

    with start_server(MODEL, max_batch=8, threads=1, default_max_tokens=8, dtype="float32") as srv:
        yield srv


@pytest.fixture(scope="module")
def tiny_processor():
    from workbench.models.processor import load_processor
    from workbench.models.tiny import byte_tokenizer

    return load_processor(None, byte_tokenizer(vision=True))


def reference(model, processor, messages, n: int) -> tuple[list[int], list[float]]:
    """Greedy tokens of ``model.generate`` on the processor inputs of ``messages`` and their log-probabilities
    (transformers' own rotary positions and caching: what the server must reproduce)."""
    from workbench.data.multimodal import encode_chat, vision_batch
    from workbench.image_io import resolve_images

    example = encode_chat(processor, resolve_images(messages, allow_local_files=False), add_generation_prompt=True)
    ids = torch.tensor([example.input_ids])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            **vision_batch(ids, [example.vision]),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    tokens = out.sequences[0, ids.shape[1] :].tolist()
    return tokens, [torch.log_softmax(step[0].float(), -1)[t].item() for step, t in zip(out.logits, tokens)]


def streamed(client, model: str, messages, n: int) -> tuple[list[int], list[float], object]:
    """Greedy token ids of a streamed chat (logprobs name tokens by id), their log-probabilities, the usage."""
    stream = client.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=n,
        temperature=0,
        stream=True,
        logprobs=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True, "return_reasoning": False},
    )
    ids, logprobs, usage = [], [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.logprobs and choice.logprobs.content:
                ids += [int(t.token.split(":", 1)[1]) for t in choice.logprobs.content]
                logprobs += [t.logprob for t in choice.logprobs.content]
    return ids, logprobs, usage


# ---- what works ---------------------------------------------------------------------------------


def test_openai_client_streams_an_image_chat_and_usage_counts_its_tokens(vision_server, tiny_processor):
    from PIL import Image

    from workbench.models.processor import image_token_count

    client = vision_server.openai_client(max_retries=0)
    width, height = Image.open(SCREEN).size
    assert (width, height) == (112, 252)
    # 112x252 px -> 8x18 patches of 14 px -> 36 tokens after the 2x2 merge
    assert image_token_count(tiny_processor, width, height) == 36
    text = "Task: Open Mail\nWhat is the next action?"
    stream = client.chat.completions.create(
        model=MODEL,
        messages=image_message(png_data_url(SCREEN), text),
        max_tokens=6,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    usage = chunks[-1].usage
    plain = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
        max_tokens=1,
        temperature=0,
    )
    # the image part adds its 36 tokens plus <|begin_of_image|> and <|end_of_image|>
    assert usage.prompt_tokens == plain.usage.prompt_tokens + 36 + 2
    assert usage.completion_tokens == 6 and usage.total_tokens == usage.prompt_tokens + 6


def test_image_requests_decode_as_model_generate_does(vision_server):
    """The served greedy tokens are transformers' own generate on the same inputs: pixel values reach the
    prefill, and the rows decode with the model's 3D rotary positions (image tokens take fewer positions)."""
    from workbench.models import load_for_inference

    loaded = load_for_inference(MODEL)
    client = vision_server.openai_client(max_retries=0)
    for screen in (SCREEN, OTHER_SCREEN):
        messages = image_message(png_data_url(screen))
        tokens, logprobs, _ = streamed(client, MODEL, messages, 12)
        want_tokens, want_logprobs = reference(loaded.model, loaded.processor, messages, 12)
        assert tokens == want_tokens, screen.name
        # 1e-4: float32 sums in another order; decoding at text positions without the images' rotary offset
        # is off by ~1e-3 on this model
        assert logprobs == pytest.approx(want_logprobs, abs=1e-4), screen.name


def test_image_and_text_requests_decode_in_one_batch():
    """Two image requests and a text request admitted together decode as one batch, each row as it would alone."""
    from workbench.data.multimodal import encode_chat, vision_batch
    from workbench.image_io import resolve_images
    from workbench.models import load_for_inference
    from workbench.serve.batcher import BatchDecoder, GenerationRequest, SamplingParams

    loaded = load_for_inference(MODEL)
    prompts = []
    for screen in (SCREEN, OTHER_SCREEN):
        messages = image_message(png_data_url(screen))
        example = encode_chat(
            loaded.processor, resolve_images(messages, allow_local_files=False), add_generation_prompt=True
        )
        prompts.append((messages, example.input_ids, vision_batch(torch.tensor([example.input_ids]), [example.vision])))
    text = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hello"}], add_generation_prompt=True, tokenize=False
    )
    text_ids = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    engine = BatchDecoder(loaded.model, loaded.tokenizer, max_batch=8)
    outputs: dict[int, tuple] = {}
    done = threading.Event()
    requests, logprobs = [], {}
    for i, (ids, inputs) in enumerate([(p[1], p[2]) for p in prompts] + [(text_ids, None)]):

        def sink(event, i=i):
            if event.logprobs:
                logprobs.setdefault(i, []).extend(t.logprob for t in event.logprobs)
            if event.finish_reason is not None:
                outputs[i] = requests[i].generated
                if len(outputs) == 3:
                    done.set()

        requests.append(
            GenerationRequest(
                ids,
                SamplingParams(max_new_tokens=10, temperature=0, ignore_eos=True, logprobs=0),
                sink,
                prefill_inputs=inputs,
            )
        )
    for req in requests:  # all waiting before the engine starts: admitted together
        engine.submit(req)
    engine.start()
    try:
        assert done.wait(120)
    finally:
        engine.shutdown()
    assert engine.counters["peak_batch"] == 3
    for i, (messages, _, _) in enumerate(prompts):
        want_tokens, want_logprobs = reference(loaded.model, loaded.processor, messages, 10)
        assert outputs[i] == want_tokens
        assert logprobs[i] == pytest.approx(want_logprobs, abs=1e-4)
    ids = torch.tensor([text_ids])
    alone = loaded.model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, min_new_tokens=10, do_sample=False
    )
    assert outputs[2] == alone[0, ids.shape[1] :].tolist()


def test_langchain_chat_openai_sends_image_parts_unchanged(vision_server):
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model=MODEL,
        base_url=vision_server.base_url,
        api_key="EMPTY",
        max_tokens=4,
        temperature=0,
        max_retries=0,
        stream_usage=True,
    )
    text_only = HumanMessage(content=[{"type": "text", "text": "What is the next action?"}])
    with_image = HumanMessage(
        content=[
            {"type": "image_url", "image_url": {"url": png_data_url(SCREEN)}},
            {"type": "text", "text": "What is the next action?"},
        ]
    )
    plain = llm.invoke([text_only]).usage_metadata
    answer = llm.invoke([with_image])
    assert answer.usage_metadata["input_tokens"] == plain["input_tokens"] + 36 + 2
    streamed = list(llm.stream([with_image]))
    usage = [c.usage_metadata for c in streamed if c.usage_metadata]
    assert usage and usage[-1]["input_tokens"] == answer.usage_metadata["input_tokens"]


# ---- what is refused ----------------------------------------------------------------------------


def _not_an_image() -> str:
    return "data:image/png;base64," + base64.b64encode(b"this is text, not a PNG").decode()


BAD_IMAGE_REQUESTS = {
    # name: (message content or messages, expected words in the error message)
    "bad base64": (image_message("data:image/png;base64,@@not base64@@"), "not valid base64"),
    "not an image": (image_message(_not_an_image()), "not an image PIL can read"),
    "data URL of text": (image_message("data:text/plain;base64,aGVsbG8="), "is not an image"),
    "data URL not base64": (image_message("data:image/png,rawbytes"), "must be base64 encoded"),
    "unsupported scheme": (image_message("ftp://example.com/screen.png"), "unsupported image URL scheme 'ftp'"),
    "http URL": (image_message("http://example.com/screen.png"), "remote image URLs are not fetched"),
    "https URL": (image_message("https://example.com/screen.png"), "remote image URLs are not fetched"),
    "local path without the flag": (image_message(str(SCREEN)), "--allow-local-images"),
    "too many image tokens": (image_message(png_data_url(size=(1080, 2400))), "image tokens"),
    "aspect ratio over 200": (image_message(png_data_url(size=(600, 2))), "cannot be used"),
    "image part without image_url": ([{"role": "user", "content": [{"type": "image_url"}]}], "image_url"),
    "empty image url": (image_message(""), "image_url.url"),
    "image_url as a bare string": (
        [{"role": "user", "content": [{"type": "image_url", "image_url": "data:x"}]}],
        "image_url",
    ),
    "audio part": (
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}],
        "input_audio",
    ),
    "image in an assistant message": (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": png_data_url(SCREEN)}}]},
            {"role": "user", "content": "and now?"},
        ],
        "only accepted in user messages",
    ),
    "more image placeholders than images": (image_message(png_data_url(SCREEN), "look: <|image|>"), "rejected"),
}


@pytest.mark.parametrize("name", list(BAD_IMAGE_REQUESTS))
def test_bad_image_requests_are_400s_in_openai_shape(vision_server, name):
    messages, words = BAD_IMAGE_REQUESTS[name]
    r = httpx.post(
        vision_server.base_url + "/chat/completions",
        json={"model": MODEL, "messages": messages, "max_tokens": 4},
        timeout=60,
    )
    assert r.status_code == 400, (name, r.status_code, r.text[:500])
    error = r.json()["error"]
    assert set(error) == ERROR_KEYS and error["type"] == "invalid_request_error"
    assert words in error["message"], (name, error)
    assert error["param"] is not None and error["param"].startswith("messages"), error
    assert "Traceback" not in r.text


def test_too_many_image_tokens_names_them_in_the_context_error(vision_server, tiny_processor):
    from workbench.models.processor import image_token_count

    tokens = image_token_count(tiny_processor, 1080, 2400)
    r = httpx.post(
        vision_server.base_url + "/chat/completions",
        json={"model": MODEL, "messages": image_message(png_data_url(size=(1080, 2400))), "max_tokens": 4},
        timeout=60,
    )
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == "context_length_exceeded"
    assert "maximum context length is 1024 tokens" in error["message"]
    assert f"{tokens} of them image tokens" in error["message"], error


def test_an_image_for_a_text_only_model_names_the_model(tiny_server):
    r = httpx.post(
        tiny_server.base_url + "/chat/completions",
        json={"model": "tiny-glm4", "messages": image_message(png_data_url(SCREEN)), "max_tokens": 2},
    )
    error = r.json()["error"]
    assert r.status_code == 400 and set(error) == ERROR_KEYS
    assert "'tiny-glm4' is a text-only model" in error["message"] and error["param"] == "messages.0.content.0"
    assert error["code"] == "image_input_not_supported"


class _Recorder(BaseHTTPRequestHandler):
    hits: list = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        body = SCREEN.read_bytes()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_http_image_urls_are_refused_and_never_fetched(vision_server):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/screen.png"
        for stream in (False, True):
            r = httpx.post(
                vision_server.base_url + "/chat/completions",
                json={"model": MODEL, "messages": image_message(url), "max_tokens": 2, "stream": stream},
            )
            assert r.status_code == 400 and "not fetched" in r.json()["error"]["message"]
        assert _Recorder.hits == []
        httpx.get(url)  # the recorder does record a fetch: the assertion above could fail
        assert _Recorder.hits == ["/screen.png"]
    finally:
        server.shutdown()
        _Recorder.hits.clear()


def test_local_image_paths_only_with_the_flag(tmp_path):
    from fastapi.testclient import TestClient

    from workbench.models import load_for_inference
    from workbench.serve.app import create_app
    from workbench.serve.registry import ServeConfig, ServedModels

    served = ServedModels(
        ServeConfig(model=MODEL, allow_local_images=True, default_max_tokens=2), loaded=load_for_inference(MODEL)
    )
    served.load()
    try:
        tc = TestClient(create_app(served))

        def ask(url):
            return tc.post(
                "/v1/chat/completions", json={"model": MODEL, "messages": image_message(url), "max_tokens": 2}
            )

        ok = ask(str(SCREEN))
        assert ok.status_code == 200, ok.text
        assert ok.json()["usage"]["prompt_tokens"] == ask(png_data_url(SCREEN)).json()["usage"]["prompt_tokens"]
        for url, words in (
            (str(tmp_path / "missing.png"), "image file not found"),
            (str(tmp_path), "is a directory"),
            ("http://127.0.0.1:9/x.png", "not fetched"),
        ):
            r = ask(url)
            assert r.status_code == 400 and words in r.json()["error"]["message"], (url, r.text)
    finally:
        served.shutdown()


def test_serve_flag_allow_local_images_is_generated_from_the_config():
    import argparse

    from workbench.serve.cli import config_from_args, configure_parser

    parser = argparse.ArgumentParser()
    configure_parser(parser)
    assert config_from_args(parser.parse_args(["--model", MODEL])).allow_local_images is False
    assert config_from_args(parser.parse_args(["--model", MODEL, "--allow-local-images", "true"])).allow_local_images


# ---- an adapter trained on screenshots ------------------------------------------------------------


@pytest.fixture(scope="module")
def screenshot_run(tmp_path_factory):
    """A 3-step tiny-glm4v LoRA run on two screenshot rows of data_samples/phone_screens (the training data
    format: image parts with paths relative to the JSONL file)."""
    import json

    from tests.conftest import tiny_run_overrides
    from workbench import train
    from workbench.config import load_config

    root = tmp_path_factory.mktemp("screens")
    rows = (SAMPLES / "phone_screens" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    for row in map(json.loads, rows):
        for part in row["messages"][0]["content"]:
            if part["type"] == "image_url":  # the rows' images, where the copied JSONL can find them
                part["image_url"]["url"] = str(SAMPLES / "phone_screens" / part["image_url"]["url"])
        with open(root / "train.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    cfg = load_config(
        None,
        tiny_run_overrides(
            root / "runs",
            **{
                "model.source": MODEL,
                "data.train": str(root / "train.jsonl"),
                "data.max_length": 256,
                "schedule.max_steps": 3,
                "schedule.micro_batch_size": 2,
                "output.run_name": "screens",
            },
        ),
    )
    train(cfg)
    return root / "runs" / "screens"


def test_openai_client_streams_an_image_chat_from_a_served_adapter(screenshot_run):
    """The adapter of a run trained on screenshots, served beside its base: the stream's tokens and logprobs are
    the trained model's own (base + adapter, in-process), and differ from the base's."""
    from peft import PeftModel

    from workbench.models import load_for_inference, peft_deprecation_hidden
    from workbench.serve import start_server

    messages = image_message(png_data_url(SCREEN))
    with start_server(MODEL, runs=[str(screenshot_run)], threads=1, dtype="float32") as srv:
        client = srv.openai_client(max_retries=0)
        tokens, logprobs, usage = streamed(client, "screens", messages, 10)
        _, base_logprobs, base_usage = streamed(client, MODEL, messages, 10)
    loaded = load_for_inference(MODEL)
    with peft_deprecation_hidden():
        tuned = PeftModel.from_pretrained(loaded.model, str(screenshot_run / "adapter")).eval()
    want_tokens, want_logprobs = reference(tuned, loaded.processor, messages, 10)
    assert tokens == want_tokens
    assert logprobs == pytest.approx(want_logprobs, abs=1e-4)
    assert abs(logprobs[0] - base_logprobs[0]) > 1e-3  # the adapter is applied (B starts at zero: training moved it)
    assert usage.prompt_tokens == base_usage.prompt_tokens and usage.completion_tokens == 10
    plain_prompt = len(
        loaded.processor.tokenizer(
            loaded.tokenizer.apply_chat_template(
                [{"role": "user", "content": "Task: Open Mail\nWhat is the next action?"}],
                add_generation_prompt=True,
                tokenize=False,
            ),
            add_special_tokens=False,
        )["input_ids"]
    )
    assert usage.prompt_tokens == plain_prompt + 36 + 2  # the screenshot's 36 tokens and its two markers


def test_an_adapter_with_lora_in_the_vision_tower_serves_images(vision_server, tmp_path):
    """An adapter trained with the vision projector (LoRA layers that see image patches, not batch rows): its image
    prefill runs with that adapter alone, and the base beside it stays the base."""
    from peft import LoraConfig, PeftModel, get_peft_model

    from workbench.models import load_for_inference, peft_deprecation_hidden

    torch.manual_seed(0)
    with peft_deprecation_hidden():
        tower = get_peft_model(
            load_for_inference(MODEL).model,
            LoraConfig(
                r=4,
                lora_alpha=32,
                target_modules=["proj", "gate_proj", "up_proj", "down_proj"],
                init_lora_weights=False,
            ),
        )
    assert any(".visual.merger." in name for name, _ in tower.named_modules())
    tower.save_pretrained(tmp_path / "tower")
    messages = image_message(png_data_url(SCREEN))
    vision_server.add_adapter("tower", str(tmp_path / "tower"))
    try:
        client = vision_server.openai_client(max_retries=0)
        tuned_tokens, tuned_logprobs, _ = streamed(client, "tower", messages, 6)
        base_tokens, base_logprobs, _ = streamed(client, MODEL, messages, 6)
    finally:
        vision_server.remove_adapter("tower")
    loaded = load_for_inference(MODEL)
    want_base = reference(loaded.model, loaded.processor, messages, 6)
    with peft_deprecation_hidden():
        tuned = PeftModel.from_pretrained(loaded.model, str(tmp_path / "tower")).eval()
    want_tuned = reference(tuned, loaded.processor, messages, 6)
    assert tuned_tokens == want_tuned[0] and tuned_logprobs == pytest.approx(want_tuned[1], abs=1e-4)
    assert base_tokens == want_base[0] and base_logprobs == pytest.approx(want_base[1], abs=1e-4)
