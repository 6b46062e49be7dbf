"""Every error the server answers, in one place, in OpenAI's envelope:

    {"error": {"message": "...", "type": "invalid_request_error", "code": "model_not_served", "param": "model"}}

Routes raise `ApiError` (or let a `CompileError`, `Refused` or `PassFailed` through); `exception_handlers()` maps
every exception, Litestar's own included (malformed JSON, wrong types, unknown fields, 404, 405), to the envelope.
"""

from __future__ import annotations

import logging

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException

from spinfc.runtime.engine import EngineClosed, PassFailed, Refused
from spinfc.server.schemas import ErrorBody, ErrorResponse

log = logging.getLogger("spinfc.server")

ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
    503: "service_unavailable_error",
}
GENERIC_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large", 429: "rate_limited"}


class ApiError(Exception):
    """An error answer: HTTP status, a stable machine-readable code, a message saying what to do, the field."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.headers = headers or {}


def error_response(error: ApiError) -> Response:
    body = ErrorResponse(ErrorBody(
        message=error.message, type=ERROR_TYPES.get(error.status, "server_error"), code=error.code, param=error.param,
    ))
    return Response(body, status_code=error.status, headers=error.headers, media_type=MediaType.JSON)


def _compile_error(error) -> ApiError:
    """A frontend/pass error (spinfc.errors.CompileError): its code, and a message with where and what to do."""
    message = str(getattr(error, "message", None) or error)
    loc = getattr(error, "loc", None)
    if loc is not None and str(loc) not in message:
        message = f"{loc}: {message}"
    hint = getattr(error, "hint", None)
    if hint and hint not in message:
        message = f"{message} ({hint})"
    return ApiError(getattr(error, "status", 400), getattr(error, "code", None) or "invalid_request", message,
                    getattr(error, "param", None))


def to_api_error(error: Exception) -> ApiError:
    """The answer for any exception a request can raise."""
    try:
        from spinfc.errors import CompileError
    except ImportError:  # the frontend is not installed: no compile errors to map
        CompileError = ()  # noqa: N806

    if isinstance(error, ApiError):
        return error
    if isinstance(error, CompileError):
        return _compile_error(error)
    if isinstance(error, Refused):
        return ApiError(400, error.code, error.message, error.param)
    if isinstance(error, ValidationException):
        problems = error.extra if isinstance(error.extra, list) else []
        if any(p.get("message") == "'data'" for p in problems if isinstance(p, dict)):
            return ApiError(400, "missing_body", "the request has no body: send a JSON object")
        first = problems[0] if problems and isinstance(problems[0], dict) else {}
        key = first.get("key")
        param = None if key in (None, "data") else str(key)
        where = f" at `{param}`" if param else ""
        return ApiError(400, "invalid_request_body", f"{first.get('message', error.detail)}{where}", param)
    if isinstance(error, HTTPException):
        status = error.status_code
        if status == 413:  # Litestar refuses a body over request_max_body_size (the max_body_bytes limit)
            return ApiError(400, "max_body_bytes_exceeded", f"the body is larger than the server's limit "
                            "(max_body_bytes): split the request, or start the server with a higher --max-body-bytes")
        if status == 400:  # Litestar's only plain 400 is a body it could not decode
            return ApiError(400, "invalid_json", f"the body is not valid JSON ({error.detail}): send one JSON object")
        return ApiError(status, GENERIC_CODES.get(status, "http_error"), str(error.detail), headers=error.headers)
    if isinstance(error, PassFailed):
        return ApiError(500, "engine_error", str(error))
    if isinstance(error, EngineClosed):
        return ApiError(503, "shutting_down", str(error))
    log.exception("unhandled error", exc_info=error)
    return ApiError(500, "internal_error", f"internal error: {type(error).__name__}: {error}")


def handle(request: Request, error: Exception) -> Response:
    return error_response(to_api_error(error))


def exception_handlers() -> dict:
    return {Exception: handle}
