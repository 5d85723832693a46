"""Streamed answers: the generations' events as one server-sent-event stream, ending with ``data: [DONE]``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from .batcher import SamplingParams
from .collect import submit
from .registry import ServedModels
from .responses import usage


def sse_event(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def stream_response(
    served: ServedModels,
    request: Request,
    prompt_ids,
    choices: list[SamplingParams],
    adapter,
    formatters: list,
    images: dict | None = None,
) -> StreamingResponse:
    """One SSE stream for every choice: their chunks interleave as the decoder produces them (each names its
    choice index); the usage chunk, when asked for, comes once at the end."""
    queue: asyncio.Queue = asyncio.Queue()
    reqs = [
        submit(served, prompt_ids, params, adapter, queue, index, images)[0] for index, params in enumerate(choices)
    ]
    first = formatters[0]

    async def body() -> AsyncIterator[bytes]:
        try:
            for fmt in formatters:
                for chunk in fmt.start():
                    yield sse_event(chunk)
            running, finals = len(reqs), []
            while running:
                index, event = await queue.get()
                if event.finish_reason == "error":
                    yield sse_event(
                        {
                            "error": {
                                "message": f"Generation failed: {event.error}",
                                "type": "server_error",
                                "param": None,
                                "code": None,
                            }
                        }
                    )
                    break
                for chunk in formatters[index].delta(event):
                    yield sse_event(chunk)
                if event.finish_reason is not None:
                    running -= 1
                    finals.append(event)
            else:
                if first.include_usage:
                    total = sum(e.completion_tokens for e in finals)
                    yield sse_event(first.usage_chunk(usage(finals[0].prompt_tokens, total)))
            yield b"data: [DONE]\n\n"
        finally:
            for req in reqs:
                req.cancel()  # the client went away (or we are done): stop generating for it

    return StreamingResponse(
        body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
