"""The FastAPI application: OpenAI-compatible endpoints over a Runtime.

Every error leaves in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``. Bad input is
always a 4xx (malformed JSON and validation errors included: 400, not FastAPI's 422), because the official
clients retry 5xx answers, and a bad request retried is still bad.

Image parts of chat messages (vision-language models) are decoded and encoded by ``workbench.data.multimodal``,
the path training rows take: base64 ``data:`` URLs; local paths only with ``allow_local_images``; remote URLs
refused, never fetched. Their tokens count in usage and in the context check; pixel values reach the engine as
the request's prefill inputs.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import protocol as P
from .engine import Event, GenerationRequest, SamplingParams
from .reasoning import ReasoningParser, prompt_opens_think
from .runtime import Runtime, ServeError

log = logging.getLogger(__name__)

DISCONNECT_POLL_S = 0.5  # how often a non-streamed request checks that its client is still there


class APIError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, type=self.type, param=self.param, code=self.code)


def error_response(status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type, "param": param, "code": code}}, status_code=status)


_ERRORS = {
    400: {"model": P.ErrorResponse, "description": "Bad request (malformed JSON, invalid or unsupported field, context overflow)"},
    401: {"model": P.ErrorResponse, "description": "Missing or wrong API key (only when the server has one: then "
                                                    "every /v1 route needs it)"},
    403: {"model": P.ErrorResponse, "description": "Adapter management from another machine without an API key"},
    404: {"model": P.ErrorResponse, "description": "Unknown model id"},
    503: {"model": P.ErrorResponse, "description": "The model is still loading"},
}


def _json_or_stream(what: str, chunk: str) -> dict:
    """The 200 response of an endpoint that answers JSON, or with stream=true an SSE stream of ``chunk``s."""
    return {"description": f"{what}, or with stream=true an SSE stream of {chunk} objects ending with `data: [DONE]`",
            "content": {"text/event-stream": {"schema": {"type": "string"}}}}


def create_app(runtime: Runtime) -> FastAPI:
    app = FastAPI(title="workbench serve", version="1.0",
                  description="OpenAI-compatible chat and text completions for a base model and its LoRA adapters.")
    app.state.runtime = runtime
    _install_error_handlers(app)

    app.add_middleware(_RequireKey, key=runtime.config.api_key)

    def require_admin(request: Request) -> None:
        # Loading an adapter reads server-side paths: without an API key, only this machine may do it.
        if runtime.config.api_key:
            return
        host = request.client.host if request.client else ""
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise APIError(403, "Adapter management without an API key is only allowed from this machine; start the "
                                "server with --api-key", type="permission_error")

    def require_ready() -> None:
        if runtime.status == "loading":
            raise APIError(503, "The model is still loading; retry shortly.", type="service_unavailable")
        if runtime.status == "error":
            raise APIError(503, f"The model failed to load: {runtime.error}", type="service_unavailable")

    @app.get("/health", response_model=P.Health, responses={503: {"model": P.Health, "description": "Loading or failed"}})
    def health():
        # open to anyone even with an API key (load balancers probe it); it names the served model as the documents
        # specify, unless the operator keeps that name behind the key (health_hides_model)
        stats = runtime.engine.stats() if runtime.engine is not None and runtime.status == "ok" else {}
        hide = bool(runtime.config.api_key) and runtime.config.health_hides_model
        body = {"status": runtime.status, "model": None if hide else runtime.config.base_id,
                "running": stats.get("running", 0), "waiting": stats.get("waiting", 0),
                "peak_batch": stats.get("peak_batch", 0), "detail": runtime.error}
        return JSONResponse(body, status_code=200 if runtime.status == "ok" else 503)

    @app.get("/v1/models", response_model=P.ModelList, responses={401: _ERRORS[401]})
    def list_models():
        return {"object": "list", "data": runtime.cards() if runtime.status == "ok" else []}

    @app.get("/v1/models/{model_id:path}", response_model=P.ModelCard, responses={401: _ERRORS[401], 404: _ERRORS[404]})
    def get_model(model_id: str):
        for card in runtime.cards() if runtime.status == "ok" else []:
            if card["id"] == model_id:
                return card
        raise APIError(404, f"The model {model_id!r} does not exist", param="model", code="model_not_found")

    @app.post("/v1/chat/completions", dependencies=[Depends(require_ready)],
              response_model=P.ChatCompletion,
              responses={**_ERRORS, 200: _json_or_stream("A chat completion", "ChatCompletionChunk")})
    async def chat_completions(body: P.ChatCompletionRequest, request: Request):
        adapter = _resolve_model(runtime, body.model)
        # decoding and resizing images takes a while: off the event loop, which serves every stream
        prompt = await run_in_threadpool(_render_chat, runtime, body) if _image_parts(body) else _render_chat(runtime, body)
        prompt_ids = prompt.ids
        max_new = _max_new_tokens(runtime, len(prompt_ids), body.max_completion_tokens or body.max_tokens,
                                  "max_completion_tokens" if body.max_completion_tokens else "max_tokens", "messages",
                                  image_tokens=prompt.image_tokens)
        if body.top_logprobs is not None and not body.logprobs:
            raise APIError(400, "Invalid value for 'top_logprobs': logprobs must be set to true when top_logprobs "
                                "is used.", param="top_logprobs")
        choices = _choice_params(body, max_new, (body.top_logprobs or 0) if body.logprobs else None)
        opens_think = prompt_opens_think(prompt.text)
        formatters = [_ChatFormatter(body, opens_think, runtime.tokenizer, i) for i in range(len(choices))]
        images = await run_in_threadpool(prompt.prefill_inputs) if prompt.vision is not None else None
        if body.stream:
            return _stream(runtime, request, prompt_ids, choices, adapter, formatters, images)
        outcomes = await asyncio.gather(*(_collect(runtime, request, prompt_ids, p, adapter, images) for p in choices))
        return _merge_choices([f.complete(events) for f, events in zip(formatters, outcomes)])

    @app.post("/v1/completions", dependencies=[Depends(require_ready)],
              response_model=P.Completion,
              responses={**_ERRORS, 200: _json_or_stream("A completion", "Completion")})
    async def completions(body: P.CompletionRequest, request: Request):
        adapter = _resolve_model(runtime, body.model)
        # the model's validation already holds it to exactly one non-empty prompt (else a 400 naming 'prompt')
        prompt = body.prompt if isinstance(body.prompt, str) else body.prompt[0]
        prompt_ids = runtime.tokenizer(prompt, add_special_tokens=True)["input_ids"]
        max_new = _max_new_tokens(runtime, len(prompt_ids), body.max_tokens if body.max_tokens else 16,
                                  "max_tokens", "prompt")
        choices = _choice_params(body, max_new, body.logprobs)
        formatters = [_TextFormatter(body, runtime.tokenizer, i) for i in range(len(choices))]
        if body.stream:
            return _stream(runtime, request, prompt_ids, choices, adapter, formatters)
        outcomes = await asyncio.gather(*(_collect(runtime, request, prompt_ids, p, adapter) for p in choices))
        return _merge_choices([f.complete(events) for f, events in zip(formatters, outcomes)])

    @app.post("/v1/load_lora_adapter", dependencies=[Depends(require_admin), Depends(require_ready)],
              response_model=P.ModelCard, responses={400: _ERRORS[400], 401: _ERRORS[401], 403: _ERRORS[403],
                                                     503: _ERRORS[503]})
    def load_lora_adapter(body: P.LoadAdapterRequest):
        try:
            runtime.add_adapter(body.lora_name, body.lora_path, within=runtime.config.adapter_root)
        except ServeError as err:
            raise APIError(400, str(err), param="lora_name" if err.about == "id" else "lora_path") from None
        return next(c for c in runtime.cards() if c["id"] == body.lora_name)

    @app.post("/v1/unload_lora_adapter", dependencies=[Depends(require_admin), Depends(require_ready)],
              response_model=P.ModelList, responses={**_ERRORS, 403: _ERRORS[403]})
    def unload_lora_adapter(body: P.UnloadAdapterRequest):
        try:
            runtime.remove_adapter(body.lora_name)
        except KeyError:
            raise APIError(404, f"No adapter {body.lora_name!r} is loaded", param="lora_name",
                           code="model_not_found") from None
        return {"object": "list", "data": runtime.cards()}

    _truthful_openapi(app)
    return app


def _truthful_openapi(app: FastAPI) -> None:
    """FastAPI documents a 422 for every body it validates; this server answers 400 instead."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            for item in schema.get("paths", {}).values():
                for op in item.values():
                    op.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


# ---- errors -----------------------------------------------------------------------------------

def _field_errors(first: dict, errors: list[dict]) -> tuple[tuple, list[dict]]:
    """The field of the first error, without pydantic's union-member tags, and the errors about it: a value
    that fits no member of a union (``stop``) fails once per member, at ``stop.str``, ``stop.list[str]``...;
    their common prefix is the field."""
    loc = tuple(first.get("loc", ()))
    same = [e for e in errors if tuple(e.get("loc", ()))[:2] == loc[:2]]
    for other in same[1:]:
        theirs = tuple(other.get("loc", ()))
        n = 0
        while n < min(len(loc), len(theirs)) and loc[n] == theirs[n]:
            n += 1
        loc = loc[:n]
    # A member the value's JSON type matched failed inside (a content list whose part lacks a field): that
    # member's errors say what is wrong, not "should be a string, or ...".
    deepest = max(len(e.get("loc", ())) for e in same)
    if deepest > len(loc) + 1:
        same = [e for e in same if len(e.get("loc", ())) == deepest]
        loc = _without_tags(tuple(same[0]["loc"]))
    return loc, same


def _without_tags(loc: tuple) -> tuple:
    """A pydantic error location without its type tags: ``list[...]`` members, and in a list of a tagged union
    the tag after each index (``content.list[tagged-union[...]].0.image_url.image_url`` -> ``content.0.image_url``)."""
    out, tagged, skip = [], False, False
    for part in loc:
        if skip:
            skip = False
            continue
        if isinstance(part, str) and "[" in part:
            tagged = "tagged-union[" in part
            continue
        out.append(part)
        skip = tagged and isinstance(part, int)
    return tuple(out)


class _RequireKey:
    """With an API key, every /v1 route needs it, unknown ones included: without the key nothing under /v1
    answers, not even which model ids (adapter names are run names) are served. Plain ASGI rather than
    FastAPI's http middleware, which would get between streams and their disconnect detection."""

    def __init__(self, app, key: str | None):
        self.app = app
        self.expected = f"Bearer {key}".encode() if key else None

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if self.expected is not None and scope["type"] == "http" and (path == "/v1" or path.startswith("/v1/")):
            given = dict(scope["headers"]).get(b"authorization")
            if not given:
                return await error_response(
                    401, "You didn't provide an API key. You need to provide your API key in an Authorization "
                    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")(scope, receive, send)
            if not hmac.compare_digest(given, self.expected):  # constant time; the key given is never echoed
                return await error_response(401, "Incorrect API key provided.", code="invalid_api_key")(
                    scope, receive, send)
        await self.app(scope, receive, send)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_request: Request, exc: APIError):
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid" or tuple(first.get("loc", ())) == ("body",):
            try:
                json.loads(await request.body())
            except ValueError as err:  # UnicodeDecodeError included
                return error_response(400, f"We could not parse the JSON body of your request: {err}")
        loc, same_field = _field_errors(first, errors)
        param = ".".join(str(p) for p in loc if p != "body") or None
        # a union's alternatives each failed: "A, or B", as the config errors read
        reason = ", or ".join(dict.fromkeys(e.get("msg", "invalid") for e in same_field))
        if same_field[0].get("type") == "missing" and param:
            message = f"Missing required parameter: '{param}'."
        elif param:
            message = f"Invalid value for '{param}': {reason}."
        else:
            message = f"Invalid request body: {reason}."
        if len(errors) > len(same_field):
            message += f" ({len(errors) - len(same_field)} more error(s))"
        return error_response(400, message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return error_response(exc.status_code, str(exc.detail), type=kind)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception):
        log.exception("unexpected error")
        return error_response(500, f"Internal error: {type(exc).__name__}", type="server_error")


# ---- request -> engine --------------------------------------------------------------------------

def _resolve_model(runtime: Runtime, model_id: str) -> str | None:
    adapter = runtime.resolve(model_id)
    if adapter is False:
        raise APIError(404, f"The model {model_id!r} does not exist; GET /v1/models lists the served ids",
                       param="model", code="model_not_found")
    return adapter


def _message_text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


@dataclass
class _ChatPrompt:
    text: str
    ids: list[int]
    vision: Any = None  # the images' VisionInputs (workbench.data.multimodal) when the messages hold images

    @property
    def image_tokens(self) -> int:
        return self.vision.image_tokens if self.vision is not None else 0

    def prefill_inputs(self) -> dict:
        """Pixel values, image grids and token types for the prefill forward (computed on demand: the costly
        part of an image request, done once the request passed every check)."""
        import torch

        from ..data.multimodal import vision_batch

        return vision_batch(torch.tensor([self.ids]), [self.vision])


def _image_parts(body: P.ChatCompletionRequest) -> list[tuple[int, int]]:
    """(message, part) positions of the image parts."""
    return [(i, j) for i, m in enumerate(body.messages) if isinstance(m.content, list)
            for j, part in enumerate(m.content) if part.type == "image_url"]


def _image_messages(runtime: Runtime, body: P.ChatCompletionRequest, where: list[tuple[int, int]]) -> list[dict]:
    """The messages with their images decoded; a 400 naming the reason for anything that cannot be used."""
    from ..data.multimodal import ImageSourceError, resolve_images

    i, j = where[0]
    if runtime.processor is None:
        raise APIError(400, f"The model {body.model!r} is a text-only model and cannot read images "
                            f"(messages[{i}].content[{j}] is an image part): send text only, or ask a "
                            "vision-language model (e.g. a server started with --model tiny-glm4v).",
                       param=f"messages.{i}.content.{j}", code="image_input_not_supported")
    for i, j in where:
        if body.messages[i].role != "user":
            raise APIError(400, f"Image parts are only accepted in user messages; messages[{i}] has role "
                                f"{body.messages[i].role!r}.", param=f"messages.{i}.content.{j}")
    messages = [{"role": _template_role(m.role),
                 "content": [p.model_dump(exclude_none=True) for p in m.content] if isinstance(m.content, list)
                 else (m.content or "")} for m in body.messages]
    try:
        return resolve_images(messages, allow_local_files=runtime.config.allow_local_images)
    except ImageSourceError as err:
        hint = ("" if runtime.config.allow_local_images or "local image paths" not in str(err)
                else " (this server was not started with --allow-local-images)")
        raise APIError(400, f"Invalid image in the messages: {err}{hint}", param="messages",
                       code="invalid_image") from None


def _template_role(role: str) -> str:
    """The chat template's role of a message: OpenAI's "developer" messages are system messages to the model."""
    return "system" if role == "developer" else role


def _template_problem(err: Exception) -> APIError:
    # template errors (e.g. "roles must alternate") come from the input
    return APIError(400, f"The chat template rejected the messages: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
                    param="messages")


def _render_chat(runtime: Runtime, body: P.ChatCompletionRequest) -> _ChatPrompt:
    kwargs: dict[str, Any] = dict(body.chat_template_kwargs or {})
    for reserved in ("conversation", "messages", "tokenize", "add_generation_prompt", "return_dict", "tools",
                     "documents", "chat_template", "continue_final_message", "return_tensors"):
        if reserved in kwargs:
            raise APIError(400, f"chat_template_kwargs may not set {reserved!r}", param="chat_template_kwargs")
    if body.enable_thinking is not None:
        kwargs["enable_thinking"] = body.enable_thinking
    from jinja2 import TemplateError

    from ..data.multimodal import ImageSourceError, encode_prompt

    images = _image_parts(body)
    if images:
        messages = _image_messages(runtime, body, images)
    else:
        messages = [{"role": _template_role(m.role), "content": _message_text(m.content)} for m in body.messages]
    try:
        example = encode_prompt(runtime.tokenizer, messages, runtime.processor, template_kwargs=kwargs)
    except ImageSourceError as err:  # e.g. an aspect ratio the image processor cannot resize
        raise APIError(400, f"Invalid image in the messages: {err}", param="messages", code="invalid_image") from None
    except (TemplateError, ValueError, TypeError) as err:  # what a template raises on messages it cannot render
        raise _template_problem(err) from None
    if not example.input_ids:
        raise APIError(400, "The messages render to an empty prompt", param="messages")
    return _ChatPrompt(runtime.tokenizer.decode(example.input_ids), example.input_ids, example.vision)


def _max_new_tokens(runtime: Runtime, prompt_len: int, requested: int | None, param: str, prompt_param: str,
                    image_tokens: int = 0) -> int:
    limit = runtime.engine.max_context
    of_images = f", {image_tokens} of them image tokens" if image_tokens else ""
    fix = " (or use fewer or smaller images)" if image_tokens else ""
    if requested is None:
        requested = runtime.config.default_max_tokens or (limit - prompt_len)
        requested = min(requested, limit - prompt_len)
        if requested < 1:
            raise APIError(400, f"This model's maximum context length is {limit} tokens. However, your messages "
                                f"resulted in {prompt_len} tokens{of_images}. Please reduce the length of the "
                                f"messages{fix}.", param=prompt_param, code="context_length_exceeded")
        return requested
    if prompt_len + requested > limit:
        raise APIError(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                            f"{prompt_len + requested} tokens ({prompt_len} in the messages{of_images}, {requested} "
                            f"in the completion). Please reduce the length of the messages or completion{fix}.",
                       param=prompt_param, code="context_length_exceeded")
    return requested


def _sampling(body: P.SamplingFields, max_new: int, logprobs: int | None = None) -> SamplingParams:
    # the model's validation caps the list (else a 400 naming 'stop'); StopStringMatcher drops empty strings
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    return SamplingParams(max_new_tokens=max_new, temperature=1.0 if body.temperature is None else body.temperature,
                          top_p=1.0 if body.top_p is None else body.top_p, seed=body.seed, stop=stops,
                          ignore_eos=body.ignore_eos, frequency_penalty=body.frequency_penalty or 0.0,
                          presence_penalty=body.presence_penalty or 0.0,
                          repetition_penalty=1.0 if body.repetition_penalty is None else body.repetition_penalty,
                          logprobs=logprobs)


def _choice_params(body: P.SamplingFields, max_new: int, logprobs: int | None) -> list[SamplingParams]:
    """One SamplingParams per requested choice: choice i samples with seed + i, so that n seeded choices differ
    from each other and each is reproducible."""
    base = _sampling(body, max_new, logprobs)
    return [replace(base, seed=None if base.seed is None else base.seed + i) for i in range(body.n or 1)]


def _merge_choices(objects: list[dict]) -> dict:
    """The n single-choice responses as one: their choices in order, usage summed over the completions."""
    merged = dict(objects[0])
    merged["choices"] = [c for obj in objects for c in obj["choices"]]
    completion = sum(obj["usage"]["completion_tokens"] for obj in objects)
    merged["usage"] = _usage(objects[0]["usage"]["prompt_tokens"], completion)
    return merged


def _submit(runtime: Runtime, prompt_ids, params, adapter, q: asyncio.Queue | None = None,
            index: int | None = None, images: dict | None = None) -> tuple[GenerationRequest, asyncio.Queue]:
    """Start one generation; its events go to ``q`` (a new queue by default), as ``(index, event)`` when an
    index is given (several choices sharing one queue). ``images``: the prompt's prefill inputs."""
    loop = asyncio.get_running_loop()
    q = q if q is not None else asyncio.Queue()

    def sink(event: Event) -> None:  # engine thread -> event loop
        try:
            loop.call_soon_threadsafe(q.put_nowait, event if index is None else (index, event))
        except RuntimeError:  # loop closed: the server is going down
            pass

    req = GenerationRequest(prompt_ids, params, sink, adapter=adapter, prefill_inputs=images)
    runtime.engine.submit(req)
    return req, q


async def _collect(runtime: Runtime, request: Request, prompt_ids, params, adapter, images: dict | None = None) -> list[Event]:
    req, q = _submit(runtime, prompt_ids, params, adapter, images=images)
    events: list[Event] = []
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


def _sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def _stream(runtime: Runtime, request: Request, prompt_ids, choices: list[SamplingParams], adapter,
            formatters: list, images: dict | None = None) -> StreamingResponse:
    """One SSE stream for every choice: their chunks interleave as the engine produces them (each names its
    choice index); the usage chunk, when asked for, comes once at the end."""
    queue: asyncio.Queue = asyncio.Queue()
    reqs = [_submit(runtime, prompt_ids, params, adapter, queue, index, images)[0] for index, params in enumerate(choices)]
    first = formatters[0]

    async def body() -> AsyncIterator[bytes]:
        try:
            for fmt in formatters:
                for chunk in fmt.start():
                    yield _sse(chunk)
            running, finals = len(reqs), []
            while running:
                index, event = await queue.get()
                if event.finish_reason == "error":
                    yield _sse({"error": {"message": f"Generation failed: {event.error}", "type": "server_error",
                                          "param": None, "code": None}})
                    break
                for chunk in formatters[index].delta(event):
                    yield _sse(chunk)
                if event.finish_reason is not None:
                    running -= 1
                    finals.append(event)
            else:
                if first.include_usage:
                    yield _sse(first.usage_chunk(_usage(finals[0].prompt_tokens,
                                                        sum(e.completion_tokens for e in finals))))
            yield b"data: [DONE]\n\n"
        finally:
            for req in reqs:
                req.cancel()  # the client went away (or we are done): stop generating for it

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


# ---- engine events -> OpenAI objects -----------------------------------------------------------

def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class _TokenNames:
    """How logprobs name a token: its text, or 'token_id:ID' (return_tokens_as_token_ids)."""

    def __init__(self, tokenizer, as_ids: bool):
        self.tokenizer, self.as_ids = tokenizer, as_ids

    def __call__(self, token: int) -> str:
        return f"token_id:{token}" if self.as_ids else self.tokenizer.decode([token])


def _chat_logprobs(name: _TokenNames, entries) -> dict | None:
    """OpenAI's chat ``logprobs`` object for some generated tokens; None when they were not asked for."""
    if entries is None:
        return None

    def item(token: int, logprob: float) -> dict:
        text = name(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    return {"content": [{**item(e.token, e.logprob), "top_logprobs": [item(t, lp) for t, lp in e.top]}
                        for e in entries]}


def _text_logprobs(name: _TokenNames, entries, offset: int = 0) -> dict | None:
    """The legacy completions ``logprobs`` object (tokens, token_logprobs, top_logprobs, text_offset)."""
    if entries is None:
        return None
    tokens = [name(e.token) for e in entries]
    offsets, at = [], offset
    for text in tokens:
        offsets.append(at)
        at += len(text)
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{name(t): lp for t, lp in e.top} for e in entries],
            "text_offset": offsets}


class _Formatter:
    """What a chat and a text completion response share: the id, time, model and choice index, token names for
    log-probabilities, and the usage chunk that ends a stream."""

    id_prefix = ""
    chunk_object = ""

    def __init__(self, body: P.SamplingFields, tokenizer, index: int):
        self.id = f"{self.id_prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = body.model
        self.index = index
        self.names = _TokenNames(tokenizer, body.return_tokens_as_token_ids)
        self.include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def usage_chunk(self, usage: dict) -> dict:
        return {"id": self.id, "object": self.chunk_object, "created": self.created, "model": self.model,
                "choices": [], "usage": usage}


def _all_logprobs(events: list[Event]) -> list | None:
    """Every token's log-probability entry of a finished generation (None when none were asked for)."""
    return None if events[-1].logprobs is None else [t for e in events for t in e.logprobs or []]


class _ChatFormatter(_Formatter):
    id_prefix = "chatcmpl"
    chunk_object = "chat.completion.chunk"

    def __init__(self, body: P.ChatCompletionRequest, starts_in_reasoning: bool, tokenizer, index: int = 0):
        super().__init__(body, tokenizer, index)
        self.split = body.return_reasoning
        self.parser = ReasoningParser(starts_in_reasoning) if self.split else None
        # inline mode with a template that pre-opens <think>: give the client the tag the model never wrote
        self._inline_prefix = "<think>" if (starts_in_reasoning and not self.split) else ""

    def _chunk(self, delta: dict, finish_reason: str | None = None, logprobs: dict | None = None) -> dict:
        chunk = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                 "choices": [{"index": self.index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}]}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def _parts(self, text: str, final: bool) -> tuple[str, str]:
        if not self.split:
            out, self._inline_prefix = self._inline_prefix + text, ""
            return "", out
        part = self.parser.feed(text)
        reasoning, content = part.reasoning, part.content
        if final:
            rest = self.parser.flush()
            reasoning, content = reasoning + rest.reasoning, content + rest.content
        return reasoning, content

    def start(self) -> list[dict]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def delta(self, event: Event) -> list[dict]:
        final = event.finish_reason is not None
        reasoning, content = self._parts(event.text, final)
        logprobs = _chat_logprobs(self.names, event.logprobs) if event.logprobs else None
        chunks = []
        if reasoning:  # the tokens' logprobs go with the first chunk their text appears in
            chunks.append(self._chunk({"reasoning_content": reasoning, "reasoning": reasoning}, logprobs=logprobs))
            logprobs = None
        if content:
            chunks.append(self._chunk({"content": content}, logprobs=logprobs))
            logprobs = None
        if final:
            chunks.append(self._chunk({}, event.finish_reason, logprobs=logprobs))
        return chunks

    def complete(self, events: list[Event]) -> dict:
        reasoning, content = self._parts("".join(e.text for e in events), final=True)
        last = events[-1]
        message: dict = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning_content"] = message["reasoning"] = reasoning
        entries = _all_logprobs(events)
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": self.index, "message": message,
                             "logprobs": _chat_logprobs(self.names, entries), "finish_reason": last.finish_reason}],
                "usage": _usage(last.prompt_tokens, last.completion_tokens)}


class _TextFormatter(_Formatter):
    id_prefix = "cmpl"
    chunk_object = "text_completion"

    def __init__(self, body: P.CompletionRequest, tokenizer, index: int = 0):
        super().__init__(body, tokenizer, index)
        self._offset = 0  # characters streamed so far (text_offset of the next token)

    def _obj(self, text: str, finish_reason: str | None, logprobs: dict | None = None) -> dict:
        obj = {"id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
               "choices": [{"index": self.index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}]}
        if self.include_usage:
            obj["usage"] = None
        return obj

    def start(self) -> list[dict]:
        return []

    def delta(self, event: Event) -> list[dict]:
        out = []
        logprobs = _text_logprobs(self.names, event.logprobs, self._offset) if event.logprobs else None
        if event.text:
            out.append(self._obj(event.text, None, logprobs))
            self._offset += len(event.text)
            logprobs = None
        if event.finish_reason is not None:
            out.append(self._obj("", event.finish_reason, logprobs))
        return out

    def complete(self, events: list[Event]) -> dict:
        last = events[-1]
        obj = self._obj("".join(e.text for e in events), last.finish_reason, _text_logprobs(self.names, _all_logprobs(events)))
        obj["usage"] = _usage(last.prompt_tokens, last.completion_tokens)
        return obj
