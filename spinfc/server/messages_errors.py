"""/v1/messages answers every error in Anthropic's envelope, with its types by status, so Anthropic's SDKs raise
their own exceptions (`anthropic.BadRequestError`, `AuthenticationError`, ...):

    {"type": "error", "error": {"type": "invalid_request_error", "message": "...", "code": "...", "param": "..."}}

`code` and `param` are spinfc's (the same as every other route's, errors.py), beside Anthropic's two fields. The
route's own exception handler, so the token check and the body's checks answer this way too.
"""

from __future__ import annotations

from litestar import MediaType, Request, Response

from spinfc.server.errors import ApiError, to_api_error
from spinfc.wire.messages import MessagesErrorBody, MessagesErrorResponse

TYPES = {  # Anthropic's error types by status; any other 4xx is an invalid request, any other 5xx an api_error
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
}


def envelope(error: ApiError) -> MessagesErrorResponse:
    kind = TYPES.get(error.status, "api_error" if error.status >= 500 else "invalid_request_error")
    return MessagesErrorResponse(type="error", error=MessagesErrorBody(type=kind, message=error.message,
                                                                       code=error.code, param=error.param))


def handle(request: Request, error: Exception) -> Response:
    api = to_api_error(error)
    return Response(envelope(api), status_code=api.status, headers=api.headers, media_type=MediaType.JSON)
