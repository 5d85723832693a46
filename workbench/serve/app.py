"""The FastAPI application: OpenAI-compatible endpoints over a Runtime (``app.state.runtime``).

Each route is a small function here; what they share lives beside them: errors in OpenAI's shape and their
handlers (``errors``), the request rendered for the engine (``render``: chat template, images, limits,
sampling), the engine's generations collected (``generate``) or streamed as server-sent events (``sse``), and
the engine's events as OpenAI objects (``responses``, with ``logprobs``).
"""
from __future__ import annotations

import asyncio
import hmac

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from . import protocol as P
from .errors import ERROR_RESPONSES, APIError, error_response, install_error_handlers
from .generate import collect
from .reasoning import prompt_opens_think
from .render import choice_params, image_parts, max_new_tokens, render_chat
from .responses import ChatFormatter, TextFormatter, merge_choices
from .runtime import Runtime, ServeError
from .sse import stream_response

router = APIRouter()


def create_app(runtime: Runtime) -> FastAPI:
    app = FastAPI(title="workbench serve", version="1.0",
                  description="OpenAI-compatible chat and text completions for a base model and its LoRA adapters.")
    app.state.runtime = runtime
    install_error_handlers(app)
    app.add_middleware(_RequireKey, key=runtime.config.api_key)
    app.include_router(router)
    _truthful_openapi(app)
    return app


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime


def require_admin(request: Request, runtime: Runtime = Depends(runtime_of)) -> None:
    # Loading an adapter reads server-side paths: without an API key, only this machine may do it.
    if runtime.config.api_key:
        return
    host = request.client.host if request.client else ""
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise APIError(403, "Adapter management without an API key is only allowed from this machine; start the "
                            "server with --api-key", type="permission_error")


def require_ready(runtime: Runtime = Depends(runtime_of)) -> None:
    if runtime.status == "loading":
        raise APIError(503, "The model is still loading; retry shortly.", type="service_unavailable")
    if runtime.status == "error":
        raise APIError(503, f"The model failed to load: {runtime.error}", type="service_unavailable")


def _json_or_stream(what: str, chunk: str) -> dict:
    """The 200 response of an endpoint that answers JSON, or with stream=true an SSE stream of ``chunk``s."""
    return {"description": f"{what}, or with stream=true an SSE stream of {chunk} objects ending with `data: [DONE]`",
            "content": {"text/event-stream": {"schema": {"type": "string"}}}}


@router.get("/health", response_model=P.Health,
            responses={503: {"model": P.Health, "description": "Loading or failed"}})
def health(runtime: Runtime = Depends(runtime_of)):
    # open to anyone even with an API key (load balancers probe it); it names the served model as the documents
    # specify, unless the operator keeps that name behind the key (health_hides_model)
    stats = runtime.engine.stats() if runtime.engine is not None and runtime.status == "ok" else {}
    hide = bool(runtime.config.api_key) and runtime.config.health_hides_model
    body = {"status": runtime.status, "model": None if hide else runtime.config.base_id,
            "running": stats.get("running", 0), "waiting": stats.get("waiting", 0),
            "peak_batch": stats.get("peak_batch", 0), "detail": runtime.error}
    return JSONResponse(body, status_code=200 if runtime.status == "ok" else 503)


@router.get("/v1/models", response_model=P.ModelList, responses={401: ERROR_RESPONSES[401]})
def list_models(runtime: Runtime = Depends(runtime_of)):
    return {"object": "list", "data": runtime.cards() if runtime.status == "ok" else []}


@router.get("/v1/models/{model_id:path}", response_model=P.ModelCard,
            responses={401: ERROR_RESPONSES[401], 404: ERROR_RESPONSES[404]})
def get_model(model_id: str, runtime: Runtime = Depends(runtime_of)):
    for card in runtime.cards() if runtime.status == "ok" else []:
        if card["id"] == model_id:
            return card
    raise APIError(404, f"The model {model_id!r} does not exist", param="model", code="model_not_found")


@router.post("/v1/chat/completions", dependencies=[Depends(require_ready)], response_model=P.ChatCompletion,
             responses={**ERROR_RESPONSES, 200: _json_or_stream("A chat completion", "ChatCompletionChunk")})
async def chat_completions(body: P.ChatCompletionRequest, request: Request, runtime: Runtime = Depends(runtime_of)):
    adapter = _resolve_model(runtime, body.model)
    # decoding and resizing images takes a while: off the event loop, which serves every stream
    prompt = await run_in_threadpool(render_chat, runtime, body) if image_parts(body) else render_chat(runtime, body)
    prompt_ids = prompt.ids
    max_new = max_new_tokens(runtime, len(prompt_ids), body.max_completion_tokens or body.max_tokens,
                             "max_completion_tokens" if body.max_completion_tokens else "max_tokens", "messages",
                             image_tokens=prompt.image_tokens)
    if body.top_logprobs is not None and not body.logprobs:
        raise APIError(400, "Invalid value for 'top_logprobs': logprobs must be set to true when top_logprobs "
                            "is used.", param="top_logprobs")
    choices = choice_params(body, max_new, (body.top_logprobs or 0) if body.logprobs else None)
    opens_think = prompt_opens_think(prompt.text)
    formatters = [ChatFormatter(body, opens_think, runtime.tokenizer, i, runtime.config.reasoning != "inline")
                  for i in range(len(choices))]
    images = await run_in_threadpool(prompt.prefill_inputs) if prompt.vision is not None else None
    if body.stream:
        return stream_response(runtime, request, prompt_ids, choices, adapter, formatters, images)
    outcomes = await asyncio.gather(*(collect(runtime, request, prompt_ids, p, adapter, images) for p in choices))
    return merge_choices([f.complete(events) for f, events in zip(formatters, outcomes)])


@router.post("/v1/completions", dependencies=[Depends(require_ready)], response_model=P.Completion,
             responses={**ERROR_RESPONSES, 200: _json_or_stream("A completion", "Completion")})
async def completions(body: P.CompletionRequest, request: Request, runtime: Runtime = Depends(runtime_of)):
    adapter = _resolve_model(runtime, body.model)
    # the model's validation already holds it to exactly one non-empty prompt (else a 400 naming 'prompt')
    prompt = body.prompt if isinstance(body.prompt, str) else body.prompt[0]
    prompt_ids = runtime.tokenizer(prompt, add_special_tokens=True)["input_ids"]
    max_new = max_new_tokens(runtime, len(prompt_ids), body.max_tokens if body.max_tokens else 16,
                             "max_tokens", "prompt")
    choices = choice_params(body, max_new, body.logprobs)
    formatters = [TextFormatter(body, runtime.tokenizer, i) for i in range(len(choices))]
    if body.stream:
        return stream_response(runtime, request, prompt_ids, choices, adapter, formatters)
    outcomes = await asyncio.gather(*(collect(runtime, request, prompt_ids, p, adapter) for p in choices))
    return merge_choices([f.complete(events) for f, events in zip(formatters, outcomes)])


@router.post("/v1/load_lora_adapter", dependencies=[Depends(require_admin), Depends(require_ready)],
             response_model=P.ModelCard, responses={k: ERROR_RESPONSES[k] for k in (400, 401, 403, 503)})
def load_lora_adapter(body: P.LoadAdapterRequest, runtime: Runtime = Depends(runtime_of)):
    try:
        runtime.add_adapter(body.lora_name, body.lora_path, within=runtime.config.adapter_root)
    except ServeError as err:
        raise APIError(400, str(err), param="lora_name" if err.about == "id" else "lora_path") from None
    return next(c for c in runtime.cards() if c["id"] == body.lora_name)


@router.post("/v1/unload_lora_adapter", dependencies=[Depends(require_admin), Depends(require_ready)],
             response_model=P.ModelList, responses=ERROR_RESPONSES)
def unload_lora_adapter(body: P.UnloadAdapterRequest, runtime: Runtime = Depends(runtime_of)):
    try:
        runtime.remove_adapter(body.lora_name)
    except KeyError:
        raise APIError(404, f"No adapter {body.lora_name!r} is loaded", param="lora_name",
                       code="model_not_found") from None
    return {"object": "list", "data": runtime.cards()}


def _resolve_model(runtime: Runtime, model_id: str) -> str | None:
    adapter = runtime.resolve(model_id)
    if adapter is False:
        raise APIError(404, f"The model {model_id!r} does not exist; GET /v1/models lists the served ids",
                       param="model", code="model_not_found")
    return adapter


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
