"""Tokens: `--token` closes every route but health; `--trusted-token` marks the operator's own front end.

A token comes as `Authorization: Bearer <token>` (OpenAI's SDKs) or `x-api-key: <token>` (Anthropic's); the bearer
token is read when both are sent.

    no --token          every route is open; a trusted caller still needs the trusted token to be trusted
    --token T           every route but /healthz /livez /readyz needs the token T (or the trusted token): anything
                        else is 401 invalid_token
    --trusted-token S   a caller sending S may send per-call `limits` and `features`, sees the plan of its request
                        (`debug`) and may POST/DELETE /v0/drain; others get 403 trusted_token_required for those

Tokens are compared with `hmac.compare_digest`, so the time a comparison takes does not leak how much matched.
`owner_of` is who a kept stream belongs to (server/streams/): a digest of the token presented, so only that token
reads, cancels or deletes it (with no token, the callers that send none).
"""

from __future__ import annotations

import hashlib
import hmac

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from spinfc.server.errors import ApiError

PUBLIC = {"public": True}  # route handler opt of the health routes: no token needed


def bearer(connection: ASGIConnection) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else that of `x-api-key`, else None."""
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return connection.headers.get("x-api-key", "").strip() or None


def owner_of(connection: ASGIConnection) -> str:
    """Who the caller is to a kept stream: the SHA-256 of the token it presented ("" for none)."""
    token = bearer(connection)
    return hashlib.sha256(token.encode()).hexdigest() if token else ""


def matches(given: str | None, expected: str | None) -> bool:
    """Whether `given` is `expected`, in time independent of where they differ; False when either is unset."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def is_trusted(connection: ASGIConnection) -> bool:
    """Whether the caller sent the server's trusted token (never true when the server has none)."""
    settings = connection.app.state.service.settings.server
    return matches(bearer(connection), settings.trusted_token)


def require_token(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    """App-wide guard: with `--token`, a route not marked public needs the token or the trusted token."""
    settings = connection.app.state.service.settings.server
    if settings.token is None or handler.opt.get("public"):
        return
    given = bearer(connection)
    if matches(given, settings.token) or matches(given, settings.trusted_token):
        return
    what = "no bearer token or x-api-key" if given is None else "a token that is not this server's"
    raise ApiError(401, "invalid_token", f"the request has {what}: send `Authorization: Bearer <token>` (or "
                   "`x-api-key: <token>`) with the token the server was started with (--token)",
                   headers={"WWW-Authenticate": "Bearer"})


def require_trusted(connection: ASGIConnection, what: str, param: str | None = None) -> None:
    """403 `trusted_token_required` unless the caller sent the trusted token; `what` names what was asked."""
    if is_trusted(connection):
        return
    configured = connection.app.state.service.settings.server.trusted_token is not None
    fix = ("send the trusted token (--trusted-token) as the bearer token" if configured else
           "this server has no trusted token: start it with --trusted-token to allow it")
    raise ApiError(403, "trusted_token_required", f"{what} is for trusted callers only: {fix}", param=param)
