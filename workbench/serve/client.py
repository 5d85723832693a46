"""Chat with served models from a notebook: ``chat(model, prompt)`` and ``compare(prompt, models=[...])``.

Built on langchain-openai. Its ``ChatOpenAI`` throws away the ``reasoning_content`` / ``reasoning`` fields
that thinking models return, so ``ReasoningChatOpenAI`` keeps them in
``message.additional_kwargs["reasoning_content"]`` (streamed and not), as langchain-deepseek does.

Output streams as plain text, or as a live HTML table inside Jupyter (IPython's display, no ipywidgets).
Images (vision-language models): ``images=[...]`` (file paths, bytes or data: URLs) go with the prompt as
OpenAI image parts, inline as base64 data: URLs (``remote.prompt_messages``, the messages every client here
sends): the server never fetches URLs. The model list comes from the one client, ``workbench.serve.remote``.
"""

from __future__ import annotations

import asyncio
import html
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langchain_openai import ChatOpenAI

from ..image_io import image_data_url
from .remote import ServerClient, prompt_messages

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


def _reasoning_of(obj: dict) -> str | None:
    return obj.get("reasoning_content") or obj.get("reasoning") or None


class ReasoningChatOpenAI(ChatOpenAI):
    """ChatOpenAI that keeps the server's reasoning in ``additional_kwargs["reasoning_content"]``."""

    def _create_chat_result(self, response, generation_info: dict | None = None):
        result = super()._create_chat_result(response, generation_info)
        body = response if isinstance(response, dict) else response.model_dump()
        for generation, choice in zip(result.generations, body.get("choices") or []):
            reasoning = _reasoning_of(choice.get("message") or {})
            if reasoning:
                generation.message.additional_kwargs["reasoning_content"] = reasoning
        return result

    def _convert_chunk_to_generation_chunk(
        self, chunk: dict, default_chunk_class: type, base_generation_info: dict | None
    ):
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        choices = chunk.get("choices") or chunk.get("chunk", {}).get("choices") or []
        if generation is not None and choices:
            reasoning = _reasoning_of(choices[0].get("delta") or {})
            if reasoning:
                generation.message.additional_kwargs["reasoning_content"] = reasoning
        return generation


def _base_url(base_url: str | None, server: Any) -> str:
    if server is not None:
        return server.base_url
    return base_url or os.environ.get("WORKBENCH_SERVE_URL") or DEFAULT_BASE_URL


_LOOP_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def _event_loop_http_client() -> Any:
    """The async HTTP client of the running event loop (None outside one). langchain-openai's default one is cached
    per base URL for the whole process, bound to the first loop that used it: the next ``asyncio.run`` (a panel
    asked twice from a script) then failed with "Event loop is closed"."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    if loop not in _LOOP_CLIENTS:
        import openai

        _LOOP_CLIENTS[loop] = openai.DefaultAsyncHttpxClient()
    return _LOOP_CLIENTS[loop]


def chat_model(
    model: str,
    *,
    base_url: str | None = None,
    server: Any = None,
    api_key: str | None = None,
    enable_thinking: bool | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    **kwargs,
) -> ReasoningChatOpenAI:
    """A langchain chat model for one served model id (made inside an event loop: streams on that loop's client)."""
    extra_body = dict(kwargs.pop("extra_body", None) or {})
    if enable_thinking is not None:
        extra_body["enable_thinking"] = enable_thinking
    key = api_key or getattr(server, "api_key", None) or os.environ.get("WORKBENCH_API_KEY") or "EMPTY"
    return ReasoningChatOpenAI(
        model=model,
        base_url=_base_url(base_url, server),
        api_key=key,
        temperature=temperature,
        max_tokens=max_tokens,
        stream_usage=True,
        extra_body=extra_body or None,
        max_retries=kwargs.pop("max_retries", 1),
        http_async_client=kwargs.pop("http_async_client", None) or _event_loop_http_client(),
        **kwargs,
    )


@dataclass
class ChatReply:
    model: str
    content: str = ""
    reasoning: str = ""
    error: str | None = None
    seconds: float = 0.0

    def __str__(self) -> str:
        return self.content


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def absorb_chunk(reply: ChatReply, chunk) -> tuple[str, str]:
    """Add one streamed message chunk's reasoning and text to ``reply``; returns (reasoning, text)."""
    reasoning = chunk.additional_kwargs.get("reasoning_content") or ""
    text = chunk.content if isinstance(chunk.content, str) else ""
    reply.reasoning += reasoning
    reply.content += text
    return reasoning, text


def _stream_reply(llm: ReasoningChatOpenAI, reply: ChatReply, messages: list, on_update=None) -> ChatReply:
    start = time.monotonic()
    try:
        for chunk in llm.stream(messages):
            reasoning, text = absorb_chunk(reply, chunk)
            if on_update and (reasoning or text):
                on_update(reasoning, text)
    except Exception as err:  # shown in place of the answer; the other columns keep going
        reply.error = f"{type(err).__name__}: {err}"
    reply.seconds = time.monotonic() - start
    return reply


def chat(
    model: str,
    prompt: str | list,
    *,
    system: str | None = None,
    images: Iterable = (),
    stream: bool = True,
    show: bool = True,
    out=None,
    **llm_options,
) -> ChatReply:
    """Ask one served model; stream the answer (reasoning first, marked) as it comes. Returns a ChatReply.
    ``images``: screenshots sent with the prompt (paths, bytes or data: URLs).

    ``llm_options``: base_url / server / api_key / enable_thinking / temperature / max_tokens (see chat_model).
    """
    llm = chat_model(model, **llm_options)
    reply = ChatReply(model)
    out = out or sys.stdout
    state = {"in_reasoning": False}

    def echo(reasoning: str, text: str) -> None:
        if reasoning:
            if not state["in_reasoning"]:
                out.write("[thinking] ")
                state["in_reasoning"] = True
            out.write(reasoning)
        if text:
            if state["in_reasoning"]:
                out.write("\n[answer] ")
                state["in_reasoning"] = False
            out.write(text)
        out.flush()

    messages = prompt if isinstance(prompt, list) else prompt_messages(prompt, system, images)
    if stream:
        _stream_reply(llm, reply, messages, echo if show else None)
        if show:
            out.write(f"\n[error] {reply.error}\n" if reply.error else "\n")
            out.flush()
    else:
        start = time.monotonic()
        try:
            msg = llm.invoke(messages)
            reply.content = msg.content if isinstance(msg.content, str) else str(msg.content)
            reply.reasoning = msg.additional_kwargs.get("reasoning_content", "")
        except Exception as err:
            reply.error = f"{type(err).__name__}: {err}"
        reply.seconds = time.monotonic() - start
        if show:
            _write_reply(reply, out)
            out.flush()
    return reply


def served_models(*, base_url: str | None = None, server: Any = None, api_key: str | None = None) -> list[str]:
    """The model ids the server lists; ServerUnreachable saying why when it cannot."""
    with ServerClient(_base_url(base_url, server), api_key or getattr(server, "api_key", None)) as client:
        return list(client.models())


def compare(
    prompt: str | list,
    models: Iterable[str] | None = None,
    *,
    system: str | None = None,
    images: Iterable = (),
    show: bool = True,
    html_output: bool | None = None,
    out=None,
    refresh_s: float = 0.25,
    **llm_options,
) -> dict[str, ChatReply]:
    """Ask several served models the same prompt (and ``images``) at once (default: every model the server
    lists) and show the answers side by side as they stream. Returns {model id: ChatReply}."""
    conn = {k: llm_options[k] for k in ("base_url", "server", "api_key") if k in llm_options}
    # a repeated id would stream twice into one column: each model once
    models = list(dict.fromkeys(models)) if models is not None else served_models(**conn)
    replies = {m: ChatReply(m) for m in models}
    messages = prompt if isinstance(prompt, list) else prompt_messages(prompt, system, images)
    threads = [
        threading.Thread(target=_stream_reply, args=(chat_model(m, **llm_options), replies[m], messages), daemon=True)
        for m in models
    ]
    for t in threads:
        t.start()
    use_html = _in_notebook() if html_output is None else html_output
    if show and use_html:
        from IPython.display import HTML, display

        handle = display(HTML(_html_table(replies, done=False)), display_id=True)
        while any(t.is_alive() for t in threads):
            time.sleep(refresh_s)
            handle.update(HTML(_html_table(replies, done=False)))
        handle.update(HTML(_html_table(replies, done=True)))
    else:
        for t in threads:
            t.join()
        if show:
            _print_side_by_side(replies, out or sys.stdout)
    for t in threads:
        t.join()
    return replies


def _html_table(replies: dict[str, ChatReply], done: bool) -> str:
    cells = []
    for r in replies.values():
        body = ""
        if r.reasoning:
            body += f"<div style='color:#777;font-style:italic;white-space:pre-wrap'>{html.escape(r.reasoning)}</div>"
        body += f"<div style='white-space:pre-wrap'>{html.escape(r.content)}</div>"
        if r.error:
            body += f"<div style='color:#b00'>{html.escape(r.error)}</div>"
        status = f"{r.seconds:.1f} s" if done else "..."
        cells.append(
            f"<td style='vertical-align:top;text-align:left;border:1px solid #ccc;padding:6px'>"
            f"<b>{html.escape(r.model)}</b> <small>{status}</small><hr>{body}</td>"
        )
    return f"<table style='width:100%;table-layout:fixed'><tr>{''.join(cells)}</tr></table>"


def _write_reply(reply: ChatReply, out) -> None:
    """A whole reply as text: its reasoning marked, then the answer (or the error in its place)."""
    if reply.reasoning:
        out.write(f"[thinking] {reply.reasoning}\n[answer] ")
    out.write((f"[error] {reply.error}" if reply.error else reply.content) + "\n")


def _print_side_by_side(replies: dict[str, ChatReply], out) -> None:
    for r in replies.values():
        out.write(f"=== {r.model} ({r.seconds:.1f} s) ===\n")
        _write_reply(r, out)
    out.flush()


__all__ = ["ReasoningChatOpenAI", "ChatReply", "chat", "chat_model", "compare", "image_data_url", "served_models"]
