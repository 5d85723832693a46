"""Generations of a request: submitted to the decoder, their events collected whole (a non-streamed answer, which
stops when its client goes away)."""

from __future__ import annotations

import asyncio
import time

from fastapi import Request

from .batcher import GenerationRequest, TokenEvent
from .errors import APIError
from .registry import ServedModels

DISCONNECT_POLL_S = 0.5  # how often a non-streamed request checks that its client is still there


def submit(
    served: ServedModels,
    prompt_ids,
    params,
    adapter,
    q: asyncio.Queue | None = None,
    index: int | None = None,
    images: dict | None = None,
) -> tuple[GenerationRequest, asyncio.Queue]:
    """Start one generation; its events go to ``q`` (a new queue by default), as ``(index, event)`` when an
    index is given (several choices sharing one queue). ``images``: the prompt's prefill inputs."""
    loop = asyncio.get_running_loop()
    q = q if q is not None else asyncio.Queue()

    def sink(event: TokenEvent) -> None:  # decoder thread -> event loop
        try:
            loop.call_soon_threadsafe(q.put_nowait, event if index is None else (index, event))
        except RuntimeError:  # loop closed: the server is going down
            pass

    req = GenerationRequest(prompt_ids, params, sink, adapter=adapter, prefill_inputs=images)
    served.decoder.submit(req)
    return req, q


async def collect(
    served: ServedModels, request: Request, prompt_ids, params, adapter, images: dict | None = None
) -> list[TokenEvent]:
    req, q = submit(served, prompt_ids, params, adapter, images=images)
    events: list[TokenEvent] = []
    next_check = time.monotonic() + DISCONNECT_POLL_S
    try:
        while True:
            try:
                event = await asyncio.wait_for(q.get(), timeout=DISCONNECT_POLL_S)
                events.append(event)
                if event.finish_reason is not None:
                    break
            except asyncio.TimeoutError:
                pass
            # checked by the clock, not only when idle: tokens keep arriving while nobody waits for them
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + DISCONNECT_POLL_S
                if await request.is_disconnected():
                    req.cancel()  # nobody will read the answer: free the slot
                    raise APIError(400, "client disconnected") from None
    finally:
        req.cancel()  # no-op when finished; frees the slot when this task was cancelled
    last = events[-1]
    if last.finish_reason == "error":
        raise APIError(500, f"Generation failed: {last.error}", type="server_error")
    return events
