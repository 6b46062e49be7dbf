"""Every error the server answers, in one place, in OpenAI's envelope:

    {"error": {"message": "...", "type": "invalid_request_error", "code": "model_not_served", "param": "model"}}

Routes raise `ApiError` (or let a `CompileError` through, `ContentTooLong` among them, or a `Refused` or
`PassFailed`); `exception_handlers()` maps every exception, Litestar's own included (a body over the limit, no
body, 404, 405), to the envelope. `type` is one of OpenAI's error types (ERROR_TYPES); `code` says which mistake,
`param` the JSON path of the field at fault.
"""

from __future__ import annotations

import logging

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException

from spinfc.errors import CompileError
from spinfc.runtime.admit.refused import Refused
from spinfc.runtime.engine import EngineClosed, PassFailed
from spinfc.wire.schemas import ErrorBody, ErrorResponse

log = logging.getLogger("spinfc.server")

ERROR_TYPES = {  # OpenAI's types; any other 4xx is an invalid request, any 5xx a server error
    401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
}
GENERIC_CODES = {404: "not_found", 405: "method_not_allowed", 429: "rate_limited"}


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


class ApiError(Exception):
    """An error answer: HTTP status, a stable machine-readable code, a message saying what to do, the field."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.headers = headers or {}


def error_body(error: ApiError) -> ErrorBody:
    """The envelope's `error` object of `error` (also one input's error in a /v1/score answer)."""
    return ErrorBody(message=error.message, type=error_type(error.status), code=error.code, param=error.param)


def error_response(error: ApiError) -> Response:
    body = ErrorResponse(error_body(error))
    return Response(body, status_code=error.status, headers=error.headers, media_type=MediaType.JSON)


def _compile_error(error) -> ApiError:
    """A frontend/pass error (spinfc.errors.CompileError): its code, and a message with where and what to do."""
    message = str(getattr(error, "message", None) or error)
    loc, param = getattr(error, "loc", None), getattr(error, "param", None)
    # a place in a template (line, column) says where; a JSON path alone is the `param`, so it is not repeated,
    # and a place in the body's text (invalid_json) is in the message already
    says_where = loc is not None and (loc.file == "<request>" or loc.file.startswith("<request>:")
                                      and (loc.line, loc.column) == (1, 1))
    if loc is not None and str(loc) not in message and not says_where:
        message = f"{loc}: {message}"
    hint = getattr(error, "hint", None)
    if hint and hint not in message:
        message = f"{message} ({hint})"
    return ApiError(getattr(error, "status", 400), getattr(error, "code", None) or "invalid_request", message,
                    getattr(error, "param", None))


def to_api_error(error: Exception) -> ApiError:
    """The answer for any exception a request can raise."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, CompileError):
        return _compile_error(error)
    if isinstance(error, Refused):
        return ApiError(400, error.code, error.message, error.param)
    if isinstance(error, ValidationException):  # Litestar's: the body is missing (every field is checked later)
        problems = error.extra if isinstance(error.extra, list) else []
        if any(p.get("message") == "'data'" for p in problems if isinstance(p, dict)):
            return ApiError(400, "missing_body", "the request has no body: send a JSON object with the header "
                            "Content-Type: application/json (docs/api.md shows each route's body)")
        return ApiError(400, "invalid_request", f"{error.detail}: see docs/api.md for this route's parameters")
    if isinstance(error, HTTPException):
        status = error.status_code
        if status == 500 and "disconnected" in str(error.detail):  # Litestar, reading a body the client cut off
            return ApiError(400, "incomplete_body", "the connection closed before the whole body arrived: send "
                            "the whole body (as many bytes as Content-Length says)")
        if status == 413:  # Litestar refuses a body over request_max_body_size (the max_body_bytes limit)
            return ApiError(413, "max_body_bytes_exceeded", "the body is larger than the server's limit "
                            "(max_body_bytes): split the request into several, or start the server with a higher "
                            "--max-body-bytes (SPINFC_MAX_BODY_BYTES, [limits] max_body_bytes)")
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
    api = to_api_error(error)
    if api.code in ("not_found", "method_not_allowed"):  # Litestar's bare "Not Found": say what exists instead
        api = routing_error(request, api)
    return error_response(api)


def routing_error(request: Request, error: ApiError) -> ApiError:
    where = f"{request.method} {request.url.path}"
    if error.code == "not_found":
        return ApiError(404, "not_found", f"no route {where}: see docs/api.md or GET /schema/openapi.json "
                        "for the routes", headers=error.headers)
    allowed = error.headers.get("allow", error.headers.get("Allow", ""))
    answers = allowed or "other methods"
    return ApiError(405, "method_not_allowed", f"{where} is not allowed: use one of {answers}",
                    headers=error.headers)


def exception_handlers() -> dict:
    return {Exception: handle}
