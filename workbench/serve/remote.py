"""The one client of OpenAI-compatible servers (``workbench serve``, vLLM, ``transformers serve``...): what every
caller in this repository talks to a model server with (``workbench eval``, ``workbench agent run``, the chat
panel's model list, the benchmarks, ``ServerHandle``). The langchain ``ChatOpenAI`` of ``serve.client`` is the other
way in, the client users bring.

- Requests: ``chat_request`` is the one way a conversation (a data row's prompt, an agent's turn, a notebook prompt
  with ``prompt_messages``) becomes a chat-completions body; its images go inline as base64 data: URLs, as an
  OpenAI client sends them, so any server started with its safe defaults accepts them.
- Errors: a refused request is a ``ServerError`` carrying the status and the server's own message, whatever shape
  it came in (OpenAI's ``{"error": {"message"}}``, ``{"error": "..."}``, FastAPI's and vLLM's ``{"detail": ...}``,
  vLLM's older ``{"message": ...}``); a server that cannot be reached is a ``ServerUnreachable``. ``chat`` returns
  its failure in the ``ModelReply`` instead (``error``; ``context_overflow`` when the prompt does not fit), so that
  one bad request among many does not stop the others.
- Streaming: ``stream_chat`` yields the chunks of a server-sent-event stream, reassembled whatever the network did
  to them; a stream cut in the middle of an event is a ``ServerError``.
- Retries: off by default (``retries=0``): a request is sent once. With ``retries=N`` a request that could not be
  sent or got 429/502/503/504 is sent again, up to N more times; a 4xx never is (a bad request retried is still
  bad). Eval and agent runs send each request once and record the failure.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

RETRIED_STATUSES = (429, 502, 503, 504)  # what a server answers while it is busy or (re)starting


@dataclass(frozen=True)
class ModelReply:
    """One reply of a model to a chat request, as a server (or a policy standing in for one) returned it: what the
    runner plays, the eval tasks score and GRPO rewards. A failed request is a reply too (``error``)."""

    content: str = ""
    reasoning: str = ""  # what the server split off as reasoning_content (thinking models)
    finish_reason: str | None = None
    error: str | None = None  # the request failed: why
    prompt_tokens: int | None = None  # the server's usage count, when it reports one
    context_overflow: bool = False  # refused: the prompt does not fit the server's context


def prompt_messages(prompt: str, system: str | None = None, images: Iterable = ()) -> list[dict]:
    """A one-turn conversation: ``system`` if given, then the user's ``prompt`` with ``images`` (paths, bytes or
    data: URLs, as base64 data: URLs) before its text."""
    from ..image_io import image_data_url

    if isinstance(images, (str, Path, bytes)):  # one image given bare
        images = [images]
    parts = [{"type": "image_url", "image_url": {"url": image_data_url(i)}} for i in images]
    content = parts + [{"type": "text", "text": prompt}] if parts else prompt
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]


def chat_request(
    model: str,
    messages: list[dict],
    *,
    base_dir=None,
    image_cache: dict | None = None,
    enable_thinking: bool | None = None,
    seed: int | None = None,
    **sampling,
) -> dict:
    """The chat-completions body asking ``model`` to answer ``messages``: image file paths (relative to
    ``base_dir``, the data file's folder) read here and sent inline (``inline_images``; ImageSourceError saying
    which image and why); ``sampling`` (temperature, max_tokens, ...) as given; ``enable_thinking`` and ``seed``
    only when set."""
    from ..image_io import inline_images

    body = {"model": model, "messages": inline_images(messages, base_dir, image_cache), **sampling}
    if seed is not None:
        body["seed"] = seed
    if enable_thinking is not None:
        body["enable_thinking"] = enable_thinking
    return body


class ServerError(RuntimeError):
    """A request the server refused or failed: ``status`` (None when no HTTP answer says it), the server's own
    ``message``, its error ``code`` when it gave one, and the answer's JSON ``body`` (None if not JSON)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None, body: Any = None):
        super().__init__(f"HTTP {status}: {message}" if status is not None else message)
        self.message, self.status, self.code, self.body = message, status, code, body

    @property
    def context_overflow(self) -> bool:
        """Refused because the prompt does not fit the context (worded so by workbench serve and vLLM)."""
        return self.status == 400 and (
            self.code == "context_length_exceeded" or "maximum context length" in self.message
        )

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's size a context-overflow message states ("... (N in the messages, ..."); None if none."""
        match = re.search(r"(\d+) in the messages", self.message)
        return int(match.group(1)) if match else None


class ServerUnreachable(ServerError):
    """The server does not answer, or not as an OpenAI-compatible one."""


def error_of(response: httpx.Response) -> ServerError:
    """The ServerError of an answer that is not a success, with the server's message in whichever shape it
    came."""
    text = response.text
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    message, code = _message_of(body)
    return ServerError(message or text[:300] or response.reason_phrase, response.status_code, code, body)


def _message_of(body: Any) -> tuple[str | None, str | None]:
    """(message, code) of an error body: OpenAI's ``{"error": {"message", "code"}}``, ``{"error": "..."}``,
    ``{"detail": "..."}`` or FastAPI's list of field errors, ``{"message": ...}``."""
    if not isinstance(body, dict):
        return None, None
    error = body.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        return error.get("message"), str(code) if code is not None else None
    if isinstance(error, str):
        return error, None
    detail = body.get("detail")
    if isinstance(detail, list):  # FastAPI's validation errors
        detail = "; ".join(
            f"{'.'.join(map(str, d.get('loc', ())))}: {d.get('msg')}" if isinstance(d, dict) else str(d) for d in detail
        )
    message = detail if isinstance(detail, str) else body.get("message")
    return (message if isinstance(message, str) else None), None


def _body(response: httpx.Response) -> Any:
    """A successful answer's JSON; its text when it is not JSON (vLLM answers adapter loads in plain text); None
    when empty (vLLM's /health)."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The data of each event of a server-sent-event stream given as lines (its ``data:`` lines joined; comments
    and other fields skipped). A stream that ends inside an event (no blank line after its data) was cut: a
    ServerError, unless that last event is ``[DONE]``."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data and data != ["[DONE]"]:
        raise ServerError(f"the event stream was cut in the middle of an event: {' '.join(data)[:200]!r}")
    if data:
        yield data[0]


class ServerClient:
    """A connection to one server (``url``: its root or its ``/v1``). Thread-safe: callers send many requests at
    once from threads and the server batches them. ``retries``: how many times a request that could not be sent,
    or got a busy answer (429/502/503/504), is sent again (0: never); ``transport``: an httpx transport (tests)."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        *,
        retries: int = 0,
        retry_wait: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ):
        root = url.rstrip("/")
        self.root = root[:-3] if root.endswith("/v1") else root
        self.base = self.root + "/v1"
        self.retries, self.retry_wait = retries, retry_wait
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    def _send(
        self, method: str, url: str, *, json_body: Any = None, stream: bool = False, timeout: float | None = None
    ) -> httpx.Response:
        """One request (sent again on a busy answer or a failure to send while retries are left): the response
        of a success; ServerError with the server's message, or ServerUnreachable."""
        extra = {} if timeout is None else {"timeout": timeout}
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.http.send(self.http.build_request(method, url, json=json_body, **extra), stream=stream)
            except httpx.HTTPError as err:
                if last:
                    raise ServerUnreachable(
                        f"cannot reach the server at {self.base}: {type(err).__name__}: {err}"
                    ) from None
            else:
                if response.is_success:
                    return response
                if last or response.status_code not in RETRIED_STATUSES:
                    response.read()
                    response.close()
                    raise error_of(response)
                response.close()
            time.sleep(self.retry_wait * 2**attempt)
        raise AssertionError("unreachable")

    def get(self, path: str, timeout: float | None = None) -> Any:
        """GET ``path`` (under the root: "/health", "/v1/models"): the answer (``_body``)."""
        return _body(self._send("GET", self.root + path, timeout=timeout))

    def post(self, path: str, body: dict) -> Any:
        """POST ``body`` to ``path`` (under the root): the answer (``_body``)."""
        return _body(self._send("POST", self.root + path, json_body=body))

    def health(self, timeout: float | None = None) -> dict:
        """GET /health: its body ({} for an empty 200, as vLLM answers); ServerError while not ready."""
        return self.get("/health", timeout) or {}

    def wait_ready(self, timeout: float = 300.0, check: Callable[[], None] | None = None) -> dict:
        """Poll /health until it answers 200 (its body); ``check`` is called between polls (it raises when the
        server can no longer come up, e.g. its process exited). RuntimeError when the server says its model
        failed to load; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if check is not None:
                check()
            try:
                return self.health(timeout=2.0)
            except ServerError as err:  # unreachable, loading (503) or failed
                last = err.body if err.body is not None else str(err)
                if isinstance(err.body, dict) and err.body.get("status") == "error":
                    raise RuntimeError(f"the server failed to load its model: {err.message}") from None
            time.sleep(0.1)
        raise TimeoutError(f"server at {self.root} not ready after {timeout:.0f} s (last health: {last})")

    def models(self) -> dict[str, dict]:
        """The served models' cards by id; ServerUnreachable saying why when the server cannot answer."""
        try:
            data = self.get("/v1/models")
        except ServerUnreachable:
            raise
        except ServerError as err:
            raise ServerUnreachable(f"GET {self.base}/models answered {err}") from None
        try:
            return {m["id"]: m for m in data["data"]}
        except (KeyError, TypeError):
            raise ServerUnreachable(
                f"GET {self.base}/models did not answer an OpenAI model list: {str(data)[:200]}"
            ) from None

    def chat(self, body: dict) -> ModelReply:
        """POST /v1/chat/completions with ``body`` (not streamed): the first choice, or the failure in the
        ModelReply."""
        try:
            data = self.post("/v1/chat/completions", body)
        except ServerError as err:
            return ModelReply(
                error=str(err),
                context_overflow=err.context_overflow,
                prompt_tokens=err.prompt_tokens if err.context_overflow else None,
            )
        choice = data["choices"][0]
        message = choice["message"]
        return ModelReply(
            message.get("content") or "",
            message.get("reasoning_content") or "",
            choice.get("finish_reason"),
            prompt_tokens=(data.get("usage") or {}).get("prompt_tokens"),
        )

    def stream_chat(self, body: dict) -> Iterator[dict]:
        """POST /v1/chat/completions with ``stream: true``: each chunk as the server sends it (``[DONE]`` ends
        it). ServerError for a refused request, an error sent inside the stream, or a stream cut mid-event."""
        response = self._send("POST", self.base + "/chat/completions", json_body={**body, "stream": True}, stream=True)
        try:
            for data in sse_data(response.iter_lines()):
                if data == "[DONE]":
                    return
                chunk = json.loads(data)
                if isinstance(chunk, dict) and "error" in chunk:
                    message, code = _message_of(chunk)
                    raise ServerError(f"the stream failed: {message}", code=code, body=chunk)
                yield chunk
        except httpx.HTTPError as err:
            raise ServerError(f"the stream broke off: {type(err).__name__}: {err}") from None
        finally:
            response.close()

    def load_adapter(self, model_id: str, path: str) -> dict:
        """Serve the LoRA adapter at ``path`` (on the server's machine) under ``model_id`` (vLLM's endpoint)."""
        return self.post("/v1/load_lora_adapter", {"lora_name": model_id, "lora_path": path})

    def unload_adapter(self, model_id: str) -> None:
        self.post("/v1/unload_lora_adapter", {"lora_name": model_id})

    def close(self) -> None:
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
