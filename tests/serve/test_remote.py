"""The one client of OpenAI-compatible servers (``workbench.serve.remote``), over real HTTP on 127.0.0.1: against our
own ``workbench serve`` with the scripted model (its output is known: ``<think>abc</think>XYZ``), and against a
scripted server that answers byte for byte what a test tells it to (the shapes other servers use: vLLM's empty
/health, its error bodies, a server-sent event torn across network writes, a stream cut mid-event, busy answers)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workbench.serve.remote import (
    ModelReply,
    ServerClient,
    ServerError,
    ServerUnreachable,
    chat_request,
    prompt_messages,
    sse_data,
)

from ..conftest import SAMPLES

SCREEN = SAMPLES / "phone_screens" / "images" / "home_01.png"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes: a stream can be cut anywhere

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.requests.append(
            {"method": method, "path": self.path, "body": body, "authorization": self.headers.get("Authorization")}
        )
        script = self.server.routes.get((method, self.path))
        if script is None:
            return self._send(404, b'{"detail":"Not Found"}')
        script(self)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._answer("GET")

    def do_POST(self):
        self._answer("POST")

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted_http():
    """A server on a free port of 127.0.0.1: ``routes[(method, path)] = fn(handler)`` writes each answer;
    ``requests`` records what came in."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.routes, server.requests = {}, []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _json(status: int, obj, content_type: str = "application/json"):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return lambda h: h._send(status, body, content_type)


def _writes(*pieces: bytes, pause: float = 0.05):
    """An SSE answer written in ``pieces``, each flushed on its own (so they reach the client as separate reads)."""

    def write(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for piece in pieces:
            h.wfile.write(piece)
            h.wfile.flush()
            time.sleep(pause)

    return write


def _chunk(content: str, finish=None) -> dict:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }


# ---- request building ------------------------------------------------------------------------------------


def test_chat_request_inlines_images_and_sets_only_what_is_given(tmp_path):
    (tmp_path / "screen.png").write_bytes(SCREEN.read_bytes())
    messages = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "screen.png"}}, {"type": "text", "text": "next?"}],
        }
    ]
    body = chat_request("m", messages, base_dir=tmp_path, temperature=0.0, max_tokens=8)
    assert set(body) == {"model", "messages", "temperature", "max_tokens"}
    assert body["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert messages[0]["content"][0]["image_url"]["url"] == "screen.png"  # the caller's messages are left as they were
    assert chat_request("m", [], seed=3, enable_thinking=False) == {
        "model": "m",
        "messages": [],
        "seed": 3,
        "enable_thinking": False,
    }
    # a notebook prompt with an image becomes the same kind of image part
    [user] = prompt_messages("next?", None, [tmp_path / "screen.png"])
    assert user["content"][0]["image_url"]["url"] == body["messages"][0]["content"][0]["image_url"]["url"]


def test_the_body_and_key_reach_the_server_as_built(scripted_http):
    scripted_http.routes[("POST", "/v1/chat/completions")] = _json(
        200,
        {
            "choices": [{"message": {"content": "hi", "reasoning_content": "why"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7},
        },
    )
    body = chat_request("m", prompt_messages("hello", "Be brief."), temperature=0.0, max_tokens=4)
    with ServerClient(_url(scripted_http) + "/v1/", api_key="k") as client:  # the root or its /v1, either works
        assert client.chat(body) == ModelReply("hi", "why", "stop", prompt_tokens=7)
    [request] = scripted_http.requests
    assert request["path"] == "/v1/chat/completions" and request["body"] == body
    assert request["authorization"] == "Bearer k"


# ---- what other servers answer ---------------------------------------------------------------------------


def test_an_empty_health_answer_and_a_vllm_model_list(scripted_http):
    scripted_http.routes[("GET", "/health")] = _json(200, b"")  # vLLM: 200, no body
    scripted_http.routes[("GET", "/v1/models")] = _json(
        200,
        {
            "object": "list",
            "data": [
                {"id": "base", "root": "/models/base", "parent": None},
                {"id": "tuned", "root": "/runs/t", "parent": "base"},
            ],
        },
    )
    with ServerClient(_url(scripted_http)) as client:
        assert client.health() == {} and client.wait_ready(5) == {}
        assert {k: v["parent"] for k, v in client.models().items()} == {"base": None, "tuned": "base"}


@pytest.mark.parametrize(
    "status, body, message, code",
    [
        (
            404,
            {
                "error": {
                    "message": "The model 'x' does not exist",
                    "type": "invalid_request_error",
                    "param": "model",
                    "code": "model_not_found",
                }
            },
            "The model 'x' does not exist",
            "model_not_found",
        ),  # OpenAI, ours
        (
            400,
            {"object": "error", "message": "max_tokens must be at least 1", "type": "BadRequestError", "code": 400},
            "max_tokens must be at least 1",
            None,
        ),  # vLLM's ErrorResponse
        (400, {"error": "Invalid value for temperature"}, "Invalid value for temperature", None),
        (
            422,
            {"detail": [{"loc": ["body", "messages"], "msg": "Field required", "type": "missing"}]},
            "body.messages: Field required",
            None,
        ),  # FastAPI's validation errors
        (500, {"detail": "Generation failed: CUDA out of memory"}, "Generation failed: CUDA out of memory", None),
        (502, b"<html>Bad Gateway</html>", "<html>Bad Gateway</html>", None),  # a proxy in front, not JSON
    ],
)
def test_errors_carry_the_status_and_the_servers_own_message(scripted_http, status, body, message, code):
    scripted_http.routes[("POST", "/v1/chat/completions")] = _json(status, body)
    with ServerClient(_url(scripted_http)) as client:
        with pytest.raises(ServerError) as caught:
            client.post("/v1/chat/completions", {"model": "x", "messages": []})
        err = caught.value
        assert (err.status, err.message, err.code) == (status, message, code)
        assert str(err) == f"HTTP {status}: {message}"
        completion = client.chat({"model": "x", "messages": []})  # chat returns the failure instead
        assert completion.error == str(err) and not completion.context_overflow


def test_a_context_overflow_is_recognised_with_the_prompt_size(scripted_http):
    message = (
        "This model's maximum context length is 1024 tokens. However, you requested 1335 tokens (1303 in the "
        "messages, 32 in the completion)."
    )
    scripted_http.routes[("POST", "/v1/chat/completions")] = _json(
        400, {"object": "error", "message": message, "code": 400}
    )
    with ServerClient(_url(scripted_http)) as client:
        completion = client.chat({"model": "m", "messages": []})
    assert completion.context_overflow and completion.prompt_tokens == 1303 and message in completion.error


def test_a_server_that_is_not_there_is_unreachable():
    with ServerClient("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(ServerUnreachable, match="cannot reach the server at http://127.0.0.1:9/v1"):
            client.models()
        assert "cannot reach the server" in client.chat({"model": "m", "messages": []}).error


# ---- retries ---------------------------------------------------------------------------------------------


def test_retries_are_off_by_default_and_bounded_when_asked(scripted_http):
    scripted_http.routes[("POST", "/v1/chat/completions")] = _json(503, {"error": {"message": "busy"}})
    with ServerClient(_url(scripted_http)) as client:
        assert client.chat({"model": "m", "messages": []}).error == "HTTP 503: busy"
    assert len(scripted_http.requests) == 1  # sent once
    scripted_http.requests.clear()
    with ServerClient(_url(scripted_http), retries=2, retry_wait=0.01) as client:
        assert client.chat({"model": "m", "messages": []}).error == "HTTP 503: busy"
    assert len(scripted_http.requests) == 3  # once, then twice more
    scripted_http.requests.clear()
    scripted_http.routes[("POST", "/v1/chat/completions")] = _json(400, {"error": {"message": "bad"}})
    with ServerClient(_url(scripted_http), retries=2, retry_wait=0.01) as client:
        assert client.chat({"model": "m", "messages": []}).error == "HTTP 400: bad"
    assert len(scripted_http.requests) == 1  # a bad request is never sent again


def test_a_retry_gets_the_answer_once_the_server_is_ready(scripted_http):
    answers = iter(
        [
            _json(503, {"error": {"message": "loading"}}),
            _json(200, {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
        ]
    )
    scripted_http.routes[("POST", "/v1/chat/completions")] = lambda h: next(answers)(h)
    with ServerClient(_url(scripted_http), retries=1, retry_wait=0.01) as client:
        assert client.chat({"model": "m", "messages": []}).content == "ok"


def test_a_request_that_could_not_be_sent_is_sent_again_while_retries_are_left(scripted_http):
    """The connection dropped before any answer (a server restarting): retried like a busy answer, and with no retries
    left it is a ServerUnreachable (``chat``: its error)."""
    ok = _json(200, {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})
    answers = iter([lambda h: None, lambda h: None, ok])  # nothing written: the server closes the connection
    scripted_http.routes[("POST", "/v1/chat/completions")] = lambda h: next(answers)(h)
    with ServerClient(_url(scripted_http), retries=2, retry_wait=0.01) as client:
        assert client.chat({"model": "m", "messages": []}).content == "ok"
    assert len(scripted_http.requests) == 3  # dropped twice, then answered
    scripted_http.requests.clear()
    scripted_http.routes[("POST", "/v1/chat/completions")] = lambda h: None
    with ServerClient(_url(scripted_http), retries=1, retry_wait=0.01) as client:
        with pytest.raises(ServerUnreachable, match="cannot reach the server"):
            client.post("/v1/chat/completions", {"model": "m", "messages": []})
    assert len(scripted_http.requests) == 2


# ---- streaming -------------------------------------------------------------------------------------------


def test_an_event_torn_across_network_writes_is_reassembled(scripted_http):
    first, second = (json.dumps(_chunk(t)).encode() for t in ("Hel", "lo"))
    scripted_http.routes[("POST", "/v1/chat/completions")] = _writes(
        b"data: " + first[:9],
        first[9:] + b"\n",
        b"\n: a comment line\n\ndata:" + second + b"\r\n\r\n",
        b"data: " + json.dumps(_chunk("", "stop")).encode() + b"\n\ndata: [DO",
        b"NE]\n\n",
    )
    with ServerClient(_url(scripted_http)) as client:
        chunks = list(client.stream_chat({"model": "m", "messages": []}))
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == ["Hel", "lo", ""]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert scripted_http.requests[0]["body"]["stream"] is True


def test_a_stream_cut_mid_event_or_failing_inside_is_an_error(scripted_http):
    whole = b"data: " + json.dumps(_chunk("a")).encode() + b"\n\n"
    scripted_http.routes[("POST", "/v1/chat/completions")] = _writes(whole, b'data: {"id": "c", "choi')
    with ServerClient(_url(scripted_http)) as client:
        seen = []
        with pytest.raises(ServerError, match="cut in the middle of an event"):
            for chunk in client.stream_chat({"model": "m", "messages": []}):
                seen.append(chunk)
        assert len(seen) == 1  # what came before the cut was given
        scripted_http.routes[("POST", "/v1/chat/completions")] = _writes(
            whole, b'data: {"error": {"message": "Generation failed: boom", "type": "server_error"}}\n\n'
        )
        with pytest.raises(ServerError, match="the stream failed: Generation failed: boom"):
            list(client.stream_chat({"model": "m", "messages": []}))
        scripted_http.routes[("POST", "/v1/chat/completions")] = _json(404, {"error": {"message": "no model 'm'"}})
        with pytest.raises(ServerError, match="HTTP 404: no model 'm'"):
            list(client.stream_chat({"model": "m", "messages": []}))
        # a server that ends its stream without [DONE] (transformers serve) ends it cleanly
        scripted_http.routes[("POST", "/v1/chat/completions")] = _writes(whole)
        assert len(list(client.stream_chat({"model": "m", "messages": []}))) == 1


def test_sse_data_joins_multi_line_data():
    assert list(sse_data(["data: {", "data: }", "", "id: 3", "data:[DONE]"])) == ["{\n}", "[DONE]"]


# ---- against workbench serve -----------------------------------------------------------------------------


def test_our_server_streamed_and_not_agree(scripted_server):
    body = chat_request("scripted", prompt_messages("hi"), temperature=0.0, max_tokens=30)
    with ServerClient(scripted_server.url) as client:
        whole = client.chat(body)
        chunks = list(client.stream_chat({**body, "stream_options": {"include_usage": True}}))
    assert (whole.reasoning, whole.content, whole.finish_reason) == ("abc", "XYZ", "stop")
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "abc"
    assert "".join(d.get("content") or "" for d in deltas) == "XYZ"
    assert chunks[-1]["usage"]["prompt_tokens"] == whole.prompt_tokens


def test_our_servers_refusal_reaches_the_caller_with_its_message(scripted_server):
    with ServerClient(scripted_server.url) as client:
        refused = client.chat(chat_request("scripted", prompt_messages("look", None, SCREEN)))
        missing = client.chat(chat_request("nope", prompt_messages("hi")))
    assert refused.error.startswith("HTTP 400: The model 'scripted' is a text-only model and cannot read images")
    assert missing.error.startswith("HTTP 404: The model 'nope' does not exist")
