"""A client of any OpenAI-compatible server (``workbench serve``, vLLM, ``transformers serve``...): the ids it serves
and one chat completion per call. Callers send many at once from threads and the server batches them
(``workbench eval``, ``workbench agent run``).

``chat_request`` is the one way a conversation (a data row's prompt, an agent's turn) becomes a request body:
its images go inline as base64 data: URLs, as an OpenAI client sends them, so any server started with its safe
defaults accepts them.

Failures of a request come back in the ``Completion`` (``error``; ``context_overflow`` when the server refused a
prompt longer than its context) so one bad request does not stop the others; a server that cannot be reached at
all is a ``ServerUnreachable`` from ``models()``, which callers ask first.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Completion:
    content: str = ""
    reasoning: str = ""  # what the server split off as reasoning_content (thinking models)
    finish_reason: Optional[str] = None
    error: Optional[str] = None  # the request failed: why
    prompt_tokens: Optional[int] = None  # the server's usage count, when it reports one
    context_overflow: bool = False  # refused: the prompt does not fit the server's context


def chat_request(model: str, messages: list[dict], *, base_dir=None, image_cache: Optional[dict] = None,
                 enable_thinking: Optional[bool] = None, seed: Optional[int] = None, **sampling) -> dict:
    """The chat-completions body asking ``model`` to answer ``messages``: image file paths (relative to
    ``base_dir``, the data file's folder) read here and sent inline (``inline_images``; ImageSourceError saying
    which image and why); ``sampling`` (temperature, max_tokens, ...) as given; ``enable_thinking`` and ``seed``
    only when set."""
    from ..data.multimodal import inline_images

    body = {"model": model, "messages": inline_images(messages, base_dir, image_cache), **sampling}
    if seed is not None:
        body["seed"] = seed
    if enable_thinking is not None:
        body["enable_thinking"] = enable_thinking
    return body


class ServerUnreachable(ValueError):
    """The server does not answer, or not as an OpenAI-compatible one."""


def _is_context_overflow(status: int, text: str) -> bool:
    # workbench serve and vLLM answer 400 with code context_length_exceeded / "maximum context length"
    return status == 400 and ("context_length_exceeded" in text or "maximum context length" in text)


def _overflow_prompt_tokens(text: str) -> Optional[int]:
    """The prompt's size that a context-overflow message states ("... (N in the messages, ...", as workbench serve
    and vLLM word it); None when it states none."""
    match = re.search(r"(\d+) in the messages", text)
    return int(match.group(1)) if match else None


class ServerClient:
    def __init__(self, url: str, api_key: Optional[str] = None, timeout: float = 600.0):
        import httpx

        root = url.rstrip("/")
        self.base = root if root.endswith("/v1") else root + "/v1"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(headers=headers, timeout=timeout)

    def models(self) -> dict[str, dict]:
        """The served models' cards by id; ServerUnreachable saying why when the server cannot answer."""
        import httpx

        try:
            r = self.http.get(self.base + "/models")
        except httpx.HTTPError as err:
            raise ServerUnreachable(f"cannot reach the server at {self.base}: {err}") from None
        if r.status_code != 200:
            raise ServerUnreachable(f"GET {self.base}/models answered {r.status_code}: {r.text[:200]}")
        try:
            return {m["id"]: m for m in r.json()["data"]}
        except (ValueError, KeyError, TypeError):
            raise ServerUnreachable(f"GET {self.base}/models did not answer an OpenAI model list: "
                                    f"{r.text[:200]}") from None

    def chat(self, body: dict) -> Completion:
        """POST /chat/completions with ``body`` (not streamed); the first choice."""
        import httpx

        try:
            r = self.http.post(self.base + "/chat/completions", json=body)
        except httpx.HTTPError as err:
            return Completion(error=f"{type(err).__name__}: {err}")
        if r.status_code != 200:
            overflow = _is_context_overflow(r.status_code, r.text)
            return Completion(error=f"HTTP {r.status_code}: {r.text[:300]}", context_overflow=overflow,
                              prompt_tokens=_overflow_prompt_tokens(r.text) if overflow else None)
        data = r.json()
        choice = data["choices"][0]
        message = choice["message"]
        return Completion(message.get("content") or "", message.get("reasoning_content") or "",
                          choice.get("finish_reason"), prompt_tokens=(data.get("usage") or {}).get("prompt_tokens"))

    def close(self) -> None:
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
