"""The FastAPI application: OpenAI-compatible endpoints over a ServedModels (``app.state.served``).

Each route is a small function here; what they share lives beside them: errors in OpenAI's shape and their
handlers (``errors``), the request rendered for the decoder (``render``: chat template, images, limits,
sampling), the decoder's generations collected (``collect``) or streamed as server-sent events (``sse``), and
the decoder's events as OpenAI objects (``responses``, with ``logprobs``).
"""

from __future__ import annotations

import asyncio
import hmac

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from . import protocol as P
from .collect import collect
from .errors import ERROR_RESPONSES, APIError, error_response, install_error_handlers
from .reasoning import prompt_opens_think
from .registry import ServedModels, ServeError
from .render import choice_params, image_parts, max_new_tokens, render_chat
from .responses import ChatFormatter, TextFormatter, merge_choices
from .sse import stream_response

router = APIRouter()


def create_app(served: ServedModels) -> FastAPI:
    app = FastAPI(
        title="workbench serve",
        version="1.0",
        description="OpenAI-compatible chat and text completions for a base model and its LoRA adapters.",
    )
    app.state.served = served
    install_error_handlers(app)
    app.add_middleware(_RequireKey, key=served.config.api_key)
    app.include_router(router)
    _truthful_openapi(app)
    return app


def served_of(request: Request) -> ServedModels:
    return request.app.state.served


def require_admin(request: Request, served: ServedModels = Depends(served_of)) -> None:
    # Loading an adapter reads server-side paths: without an API key, only this machine may do it.
    if served.config.api_key:
        return
    host = request.client.host if request.client else ""
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise APIError(
            403,
            "Adapter management without an API key is only allowed from this machine; start the server with --api-key",
            type="permission_error",
        )


def require_ready(served: ServedModels = Depends(served_of)) -> None:
    if served.status == "loading":
        raise APIError(503, "The model is still loading; retry shortly.", type="service_unavailable")
    if served.status == "error":
        raise APIError(503, f"The model failed to load: {served.error}", type="service_unavailable")


def _json_or_stream(what: str, chunk: str) -> dict:
    """The 200 response of an endpoint that answers JSON, or with stream=true an SSE stream of ``chunk``s."""
    return {
        "description": f"{what}, or with stream=true an SSE stream of {chunk} objects ending with `data: [DONE]`",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }


@router.get(
    "/health", response_model=P.Health, responses={503: {"model": P.Health, "description": "Loading or failed"}}
)
def health(served: ServedModels = Depends(served_of)):
    # open to anyone even with an API key (load balancers probe it); it names the served model as the documents
    # specify, unless the operator keeps that name behind the key (health_hides_model)
    stats = served.decoder.stats() if served.decoder is not None and served.status == "ok" else {}
    hide = bool(served.config.api_key) and served.config.health_hides_model
    body = {
        "status": served.status,
        "model": None if hide else served.config.base_id,
        "running": stats.get("running", 0),
        "waiting": stats.get("waiting", 0),
        "peak_batch": stats.get("peak_batch", 0),
        "detail": served.error,
    }
    return JSONResponse(body, status_code=200 if served.status == "ok" else 503)


@router.get("/v1/models", response_model=P.ModelList, responses={401: ERROR_RESPONSES[401]})
def list_models(served: ServedModels = Depends(served_of)):
    return {"object": "list", "data": served.cards() if served.status == "ok" else []}


@router.get(
    "/v1/models/{model_id:path}",
    response_model=P.ModelCard,
    responses={401: ERROR_RESPONSES[401], 404: ERROR_RESPONSES[404]},
)
def get_model(model_id: str, served: ServedModels = Depends(served_of)):
    for card in served.cards() if served.status == "ok" else []:
        if card["id"] == model_id:
            return card
    raise APIError(404, f"The model {model_id!r} does not exist", param="model", code="model_not_found")


@router.post(
    "/v1/chat/completions",
    dependencies=[Depends(require_ready)],
    response_model=P.ChatCompletion,
    responses={**ERROR_RESPONSES, 200: _json_or_stream("A chat completion", "ChatCompletionChunk")},
)
async def chat_completions(body: P.ChatCompletionRequest, request: Request, served: ServedModels = Depends(served_of)):
    adapter = _resolve_model(served, body.model)
    # decoding and resizing images takes a while: off the event loop, which serves every stream
    prompt = await run_in_threadpool(render_chat, served, body) if image_parts(body) else render_chat(served, body)
    prompt_ids = prompt.ids
    max_new = max_new_tokens(
        served,
        len(prompt_ids),
        body.max_completion_tokens or body.max_tokens,
        "max_completion_tokens" if body.max_completion_tokens else "max_tokens",
        "messages",
        image_tokens=prompt.image_tokens,
    )
    if body.top_logprobs is not None and not body.logprobs:
        raise APIError(
            400,
            "Invalid value for 'top_logprobs': logprobs must be set to true when top_logprobs is used.",
            param="top_logprobs",
        )
    choices = choice_params(body, max_new, (body.top_logprobs or 0) if body.logprobs else None)
    opens_think = prompt_opens_think(prompt.text)
    formatters = [
        ChatFormatter(body, opens_think, served.tokenizer, i, served.config.reasoning != "inline")
        for i in range(len(choices))
    ]
    images = await run_in_threadpool(prompt.prefill_inputs) if prompt.vision is not None else None
    if body.stream:
        return stream_response(served, request, prompt_ids, choices, adapter, formatters, images)
    outcomes = await asyncio.gather(*(collect(served, request, prompt_ids, p, adapter, images) for p in choices))
    return merge_choices([f.complete(events) for f, events in zip(formatters, outcomes)])


@router.post(
    "/v1/completions",
    dependencies=[Depends(require_ready)],
    response_model=P.Completion,
    responses={**ERROR_RESPONSES, 200: _json_or_stream("A completion", "Completion")},
)
async def completions(body: P.CompletionRequest, request: Request, served: ServedModels = Depends(served_of)):
    adapter = _resolve_model(served, body.model)
    # the model's validation already holds it to exactly one non-empty prompt (else a 400 naming 'prompt')
    prompt = body.prompt if isinstance(body.prompt, str) else body.prompt[0]
    prompt_ids = served.tokenizer(prompt, add_special_tokens=True)["input_ids"]
    max_new = max_new_tokens(
        served, len(prompt_ids), body.max_tokens if body.max_tokens else 16, "max_tokens", "prompt"
    )
    choices = choice_params(body, max_new, body.logprobs)
    formatters = [TextFormatter(body, served.tokenizer, i) for i in range(len(choices))]
    if body.stream:
        return stream_response(served, request, prompt_ids, choices, adapter, formatters)
    outcomes = await asyncio.gather(*(collect(served, request, prompt_ids, p, adapter) for p in choices))
    return merge_choices([f.complete(events) for f, events in zip(formatters, outcomes)])


@router.post(
    "/v1/load_lora_adapter",
    dependencies=[Depends(require_admin), Depends(require_ready)],
    response_model=P.ModelCard,
    responses={k: ERROR_RESPONSES[k] for k in (400, 401, 403, 503)},
)
def load_lora_adapter(body: P.LoadAdapterRequest, served: ServedModels = Depends(served_of)):
    try:
        served.add_adapter(body.lora_name, body.lora_path, within=served.config.adapter_root)
    except ServeError as err:
        raise APIError(400, str(err), param="lora_name" if err.about == "id" else "lora_path") from None
    return next(c for c in served.cards() if c["id"] == body.lora_name)


@router.post(
    "/v1/unload_lora_adapter",
    dependencies=[Depends(require_admin), Depends(require_ready)],
    response_model=P.ModelList,
    responses=ERROR_RESPONSES,
)
def unload_lora_adapter(body: P.UnloadAdapterRequest, served: ServedModels = Depends(served_of)):
    try:
        served.remove_adapter(body.lora_name)
    except KeyError:
        raise APIError(
            404, f"No adapter {body.lora_name!r} is loaded", param="lora_name", code="model_not_found"
        ) from None
    return {"object": "list", "data": served.cards()}


def _resolve_model(served: ServedModels, model_id: str) -> str | None:
    adapter = served.resolve(model_id)
    if adapter is False:
        raise APIError(
            404,
            f"The model {model_id!r} does not exist; GET /v1/models lists the served ids",
            param="model",
            code="model_not_found",
        )
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
                    401,
                    "You didn't provide an API key. You need to provide your API key in an Authorization "
                    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                )(scope, receive, send)
            if not hmac.compare_digest(given, self.expected):  # constant time; the key given is never echoed
                return await error_response(401, "Incorrect API key provided.", code="invalid_api_key")(
                    scope, receive, send
                )
        await self.app(scope, receive, send)
