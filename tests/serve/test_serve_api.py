"""Protocol conformance with the official openai client and raw HTTP, on the tiny GLM-4 model."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

MODEL = "tiny-glm4"
MSG = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def client(tiny_server):
    return tiny_server.openai_client(max_retries=0)


def sse_events(response: httpx.Response) -> list:
    events = []
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: ") :]
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_health_and_models(tiny_server):
    r = httpx.get(tiny_server.url + "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["model"] == MODEL  # as docs/serving.md
    models = tiny_server.openai_client().models.list().data
    assert [m.id for m in models] == [MODEL]
    assert models[0].object == "model"


def test_chat_non_streamed(client):
    r = client.chat.completions.create(model=MODEL, messages=MSG, max_tokens=5, temperature=0)
    assert r.object == "chat.completion" and r.model == MODEL
    assert r.choices[0].message.role == "assistant" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5 and r.usage.total_tokens == r.usage.prompt_tokens + 5
    again = client.chat.completions.create(model=MODEL, messages=MSG, max_tokens=5, temperature=0)
    assert again.choices[0].message.content == r.choices[0].message.content  # greedy is deterministic


def test_max_completion_tokens_is_honoured(client):
    r = client.chat.completions.create(model=MODEL, messages=MSG, max_completion_tokens=3, temperature=0)
    assert r.usage.completion_tokens == 3


def test_stream_shape_raw(tiny_server):
    body = {
        "model": MODEL,
        "messages": MSG,
        "max_tokens": 6,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", tiny_server.url + "/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len({c["id"] for c in chunks}) == 1  # one id throughout
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    usage_chunk, finish_chunk = chunks[-1], chunks[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 6
    assert finish_chunk["choices"][0]["finish_reason"] == "length" and finish_chunk["choices"][0]["delta"] == {}
    assert all(c["usage"] is None for c in chunks[:-1])
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    full = httpx.post(tiny_server.url + "/v1/chat/completions", json={**body, "stream": False}, timeout=60).json()
    assert text == full["choices"][0]["message"]["content"]


def test_stream_with_openai_client_matches_non_streamed(client):
    stream = client.chat.completions.create(model=MODEL, messages=MSG, max_tokens=8, temperature=0, stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "length"
    full = client.chat.completions.create(model=MODEL, messages=MSG, max_tokens=8, temperature=0)
    assert text == full.choices[0].message.content


def test_stop_string_spanning_tokens_is_cut_in_stream_and_whole(client):
    ref = client.completions.create(model=MODEL, prompt="The weather today", max_tokens=24, temperature=0)
    text = ref.choices[0].text
    # a two-character stop in the middle of the output: the tiny model's byte tokens make it span two tokens
    pos = next(
        i for i in range(3, len(text) - 2) if "\ufffd" not in text[i : i + 2] and text.find(text[i : i + 2]) == i
    )
    stop = text[pos : pos + 2]
    whole = client.completions.create(
        model=MODEL, prompt="The weather today", max_tokens=24, temperature=0, stop=[stop]
    )
    assert whole.choices[0].text == text[:pos] and whole.choices[0].finish_reason == "stop"
    pieces = [
        c.choices[0].text
        for c in client.completions.create(
            model=MODEL, prompt="The weather today", max_tokens=24, temperature=0, stop=stop, stream=True
        )
        if c.choices
    ]
    assert "".join(pieces) == text[:pos]


def test_seed_makes_sampling_reproducible(client):
    kw = dict(model=MODEL, messages=MSG, max_tokens=12, temperature=1.0, top_p=0.95)
    a = client.chat.completions.create(seed=123, **kw).choices[0].message.content
    b = client.chat.completions.create(seed=123, **kw).choices[0].message.content
    c = client.chat.completions.create(seed=124, **kw).choices[0].message.content
    assert a == b and a != c


def test_any_integer_seed_is_accepted(client):
    kw = dict(model=MODEL, messages=MSG, max_tokens=3, temperature=1.0)
    for seed in (-1, 2**64 + 5, -(2**70)):
        assert client.chat.completions.create(seed=seed, **kw).usage.completion_tokens == 3


def test_completions_endpoint(client):
    r = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=4, temperature=0)
    assert r.object == "text_completion" and r.usage.completion_tokens == 4
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="Once upon",
            max_tokens=4,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text
    assert chunks[-1].usage.completion_tokens == 4


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"n": 17}, "n"),
        ({"n": 0}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"temperature": 5}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"frequency_penalty": -2.01}, "frequency_penalty"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"repetition_penalty": 2.5}, "repetition_penalty"),
        ({"response_format": {"type": "json_object"}}, "response_format.type"),
    ],
)
def test_unsupported_or_invalid_fields_are_400_with_param(tiny_server, extra, param):
    r = httpx.post(tiny_server.url + "/v1/chat/completions", json={"model": MODEL, "messages": MSG, **extra})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": MODEL, "messages": MSG, "max_tokens": -5}, "max_tokens"),
        ({"model": MODEL, "messages": MSG, "max_tokens": "ten"}, "max_tokens"),
        ({"model": MODEL, "messages": "hello"}, "messages"),
        ({"model": MODEL, "messages": []}, "messages"),
        ({"model": MODEL, "messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
        ({"model": MODEL, "messages": MSG, "temperature": "hot"}, "temperature"),
        ({"model": MODEL, "messages": MSG, "top_p": 1.5}, "top_p"),
        ({"model": MODEL, "messages": MSG, "stream": "yes"}, "stream"),
        ({"model": MODEL, "messages": MSG, "max_tokens": "10"}, "max_tokens"),
        ({"model": MODEL, "messages": MSG, "max_tokens": 2.5}, "max_tokens"),
        ({"model": MODEL, "messages": MSG, "stop": ["x"] * 17}, "stop"),
        ({"model": 7, "messages": MSG}, "model"),
        ({"messages": MSG}, "model"),
    ],
)
def test_bad_requests_are_400_naming_the_field(tiny_server, body, param):
    r = httpx.post(tiny_server.url + "/v1/chat/completions", json=body)
    assert r.status_code == 400, (body, r.text)
    assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"


def test_a_value_fitting_no_member_of_a_union_names_every_alternative(tiny_server):
    r = httpx.post(tiny_server.url + "/v1/chat/completions", json={"model": MODEL, "messages": MSG, "stop": ["x"] * 17})
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and "valid string" in message and "at most 16 items" in message


def test_malformed_json_and_missing_fields_are_400(tiny_server):
    for raw in (b"{not json", b"", b"[1, 2]", '"\xff"'.encode("latin-1")):
        r = httpx.post(
            tiny_server.url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
        assert r.status_code == 400, (raw, r.text)
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    r = httpx.post(tiny_server.url + "/v1/chat/completions", json={"model": MODEL})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"


def test_unknown_model_is_404_and_client_does_not_retry(tiny_server):
    calls = []
    hooks = {"request": [lambda req: calls.append(req)]}
    c = openai.OpenAI(base_url=tiny_server.base_url, api_key="EMPTY", http_client=httpx.Client(event_hooks=hooks))
    with pytest.raises(openai.NotFoundError) as exc:
        c.chat.completions.create(model="nope", messages=MSG)
    assert exc.value.body["param"] == "model" and exc.value.body["code"] == "model_not_found"
    assert len(calls) == 1


def test_context_overflow_is_400(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x" * 1100}], max_tokens=5)
    assert "maximum context length" in exc.value.message and exc.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=MSG, max_tokens=1020)


def test_unknown_route_and_method_in_openai_shape(tiny_server):
    r = httpx.get(tiny_server.url + "/v1/nothing")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(tiny_server.url + "/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()


def test_image_content_is_400(tiny_server):
    msg = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]
    r = httpx.post(tiny_server.url + "/v1/chat/completions", json={"model": MODEL, "messages": msg})
    assert r.status_code == 400 and r.json()["error"]["param"].startswith("messages.0.content")


def test_api_key_protects_every_v1_route_and_health_still_names_the_model():
    from workbench.serve import start_server

    with start_server("tiny-glm4", api_key="sekrit", default_max_tokens=2) as srv:
        health = httpx.get(srv.url + "/health")
        assert health.status_code == 200 and health.json()["model"] == MODEL  # hiding it is a setting, off by default
        for method, path in (
            ("GET", "/v1/models"),
            ("GET", f"/v1/models/{MODEL}"),
            ("GET", "/v1/nothing"),
            ("POST", "/v1/completions"),
            ("POST", "/v1/load_lora_adapter"),
            ("GET", "/v1"),
        ):
            missing = httpx.request(method, srv.url + path, json={"model": MODEL, "prompt": "a"})
            assert missing.status_code == 401, (path, missing.text)
            assert set(missing.json()["error"]) == {"message", "type", "param", "code"}
            assert "didn't provide an API key" in missing.json()["error"]["message"] and MODEL not in missing.text
            wrong = httpx.request(method, srv.url + path, headers={"Authorization": "Bearer sekri"})
            assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
            assert "sekri" not in wrong.text  # the key given is not echoed
        bad = openai.OpenAI(base_url=srv.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model=MODEL, messages=MSG)
        r = httpx.get(srv.url + "/v1/models", headers={"Authorization": "Bearer sekrité".encode()})
        assert r.status_code == 401  # a non-ASCII header is a wrong key, not a server error
        good = openai.OpenAI(base_url=srv.base_url, api_key="sekrit", max_retries=0)
        assert [m.id for m in good.models.list().data] == [MODEL] and srv.models() == [MODEL]
        r = good.chat.completions.create(model=MODEL, messages=MSG, extra_body={"ignore_eos": True})
        assert r.usage.completion_tokens == 2


@pytest.mark.parametrize(
    "api_key,hide,named", [(None, False, True), ("k", False, True), ("k", True, False), (None, True, True)]
)  # without a key every route is open anyway
def test_health_hides_the_model_only_when_asked_and_a_key_is_set(api_key, hide, named):
    from fastapi.testclient import TestClient

    from workbench.serve.app import create_app
    from workbench.serve.registry import ServeConfig, ServedModels

    served = ServedModels(
        ServeConfig(model="tiny-glm4", model_id="autoglm-phone-9b", api_key=api_key, health_hides_model=hide)
    )  # never loaded: /health answers all the same
    with TestClient(create_app(served)) as tc:
        body = tc.get("/health").json()
    assert body["model"] == ("autoglm-phone-9b" if named else None)


def test_health_is_503_while_loading():
    from fastapi.testclient import TestClient

    from workbench.serve.app import create_app
    from workbench.serve.registry import ServeConfig, ServedModels

    served = ServedModels(ServeConfig(model="tiny-glm4"))  # never loaded
    with TestClient(create_app(served)) as tc:
        r = tc.get("/health")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        r = tc.post("/v1/chat/completions", json={"model": "tiny-glm4", "messages": MSG})
        assert r.status_code == 503 and r.json()["error"]["type"] == "service_unavailable"


def test_adapter_management_from_another_machine_needs_a_key():
    from fastapi.testclient import TestClient

    from workbench.serve.app import create_app
    from workbench.serve.registry import ServeConfig, ServedModels

    served = ServedModels(ServeConfig(model="tiny-glm4"))
    served.status = "ok"  # no model needed: refused before anything loads
    remote = TestClient(create_app(served), client=("192.0.2.7", 5000))
    r = remote.post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": "/etc"})
    assert r.status_code == 403 and r.json()["error"]["type"] == "permission_error"
    # no host name is trusted but this machine's addresses (starlette's test client calls itself "testclient")
    r = TestClient(create_app(served)).post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": "/etc"})
    assert r.status_code == 403 and r.json()["error"]["type"] == "permission_error"
    keyed = ServedModels(ServeConfig(model="tiny-glm4", api_key="k", adapter_root="/nonexistent"))
    keyed.status = "ok"
    r = TestClient(create_app(keyed), client=("192.0.2.7", 5000)).post(
        "/v1/load_lora_adapter",
        json={"lora_name": "x", "lora_path": "/nonexistent/x"},
        headers={"Authorization": "Bearer k"},
    )
    assert r.status_code == 400 and "does not exist" in r.json()["error"]["message"]


def test_http_adapter_paths_stay_inside_the_adapter_root(tmp_path):
    from fastapi.testclient import TestClient

    from workbench.serve.app import create_app
    from workbench.serve.registry import ServeConfig, ServedModels

    root = tmp_path / "runs"
    (root / "inside").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    served = ServedModels(ServeConfig(model="tiny-glm4", adapter_root=str(root)))
    served.status = "ok"  # refused before any model is needed
    tc = TestClient(create_app(served), client=("127.0.0.1", 50000))  # this machine: no API key needed
    for path in (
        str(root / ".." / "elsewhere"),
        str(outside),
        str(root / "link"),
        str(root / "inside" / ".." / ".."),
        "/etc",
        "~",
    ):
        r = tc.post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": path})
        err = r.json()["error"]
        assert r.status_code == 400 and err["param"] == "lora_path" and "outside the adapter root" in err["message"], (
            path
        )
    # inside the root, the path is checked for what it holds (nothing here)
    r = tc.post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": str(root / "inside")})
    assert r.status_code == 400 and "holds no peft adapter" in r.json()["error"]["message"]
    for name in ("../../etc", " x", "a" * 200, ""):
        r = tc.post("/v1/load_lora_adapter", json={"lora_name": name, "lora_path": str(root / "inside")})
        assert r.status_code == 400 and r.json()["error"]["param"] == "lora_name", name
    assert served.adapters == {}


def test_openapi_describes_what_is_accepted(tiny_server):
    spec = httpx.get(tiny_server.url + "/openapi.json").json()
    paths = spec["paths"]
    for p in ("/health", "/v1/models", "/v1/chat/completions", "/v1/completions"):
        assert p in paths
    chat = spec["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    for field in (
        "enable_thinking",
        "return_reasoning",
        "chat_template_kwargs",
        "max_completion_tokens",
        "stop",
        "seed",
    ):
        assert field in chat
    assert chat["n"]["anyOf"][0]["maximum"] == 16
    responses = paths["/v1/chat/completions"]["post"]["responses"]
    assert "422" not in responses and {"400", "401", "404"} <= set(responses)
    assert "text/event-stream" in responses["200"]["content"]
