"""Errors in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``: ``APIError`` (what a route raises),
and the handlers that turn everything else into it. Bad input is always a 4xx (malformed JSON and validation errors
included: 400, not FastAPI's 422), because the official clients retry 5xx answers, and a bad request retried is
still bad."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import protocol as P

log = logging.getLogger(__name__)


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, type=self.type, param=self.param, code=self.code)


def error_response(
    status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type, "param": param, "code": code}}, status_code=status)


ERROR_RESPONSES = {
    400: {
        "model": P.ErrorResponse,
        "description": "Bad request (malformed JSON, invalid or unsupported field, context overflow)",
    },
    401: {
        "model": P.ErrorResponse,
        "description": "Missing or wrong API key (only when the server has one: then every /v1 route needs it)",
    },
    403: {"model": P.ErrorResponse, "description": "Adapter management from another machine without an API key"},
    404: {"model": P.ErrorResponse, "description": "Unknown model id"},
    503: {"model": P.ErrorResponse, "description": "The model is still loading"},
}


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


def install_error_handlers(app: FastAPI) -> None:
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
