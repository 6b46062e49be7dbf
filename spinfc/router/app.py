"""`create_router_app(settings, config)`: one ASGI app in front of every configured model.

A request to one of the router's own routes (routes.py) is answered by the router; any other is the model's: its
body is read (up to the body limit), its `model` field names the model (a GET names it with `?model=`; without one,
the default model), and the request is handed, body and all, to that model's own app once the model is ready. The
model stays pinned until the response has been sent. What comes back is that app's answer, byte for byte.
"""

from __future__ import annotations

import time
import urllib.parse

import msgspec
from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from spinfc.config import Settings
from spinfc.router import routes
from spinfc.router.config import RouterConfig
from spinfc.router.lifespan import AppLifespan
from spinfc.router.router import Router
from spinfc.server.app import create_app as serve_app
from spinfc.server.auth import bearer, matches
from spinfc.server.errors import ApiError, error_type, exception_handlers

OWN_PATHS = ("/v1/models", "/models/", "/slots", "/healthz", "/health", "/livez", "/readyz")


class _Named(msgspec.Struct):
    model: str | None = None


def _is_own(path: str) -> bool:
    return any(path == own or path.startswith(own.rstrip("/") + "/") for own in OWN_PATHS)


class RouterApp:
    """The ASGI app: the router's routes, and every other request forwarded to its model's app."""

    def __init__(self, settings: Settings, config: RouterConfig, create_app) -> None:
        self.settings = settings
        self.router = Router(config, create_app)
        self.own = Litestar(route_handlers=routes.ROUTES, exception_handlers=exception_handlers(),
                            guards=[self._require_token])
        self.own.state.router = self.router
        self.own.state.created = int(time.time())
        self.state = self.own.state  # as a Litestar app's: tests and the CLI read app.state.router
        self._own_lifespan = AppLifespan(self.own)

    def _require_token(self, connection: ASGIConnection, handler: BaseRouteHandler) -> None:
        server = self.settings.server
        if server.token is None or handler.opt.get("public"):
            return
        given = bearer(connection)
        if not (matches(given, server.token) or matches(given, server.trusted_token)):
            raise ApiError(401, "invalid_token", "the request has no valid bearer token: send `Authorization: "
                           "Bearer <token>` with the token the server was started with (--token)",
                           headers={"WWW-Authenticate": "Bearer"})

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] != "http" or _is_own(scope["path"]):
            await self.own(scope, receive, send)
        else:
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self._own_lifespan.start()
                await self.router.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.router.stop()
                await self._own_lifespan.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(self, scope, receive, send) -> None:
        try:
            body = await self._read_body(receive)
            slot = self.router.slot(self._model_of(scope, body))
            async with self.router.use(slot) as app:
                await app(scope, _replay(body, receive), send)
        except ApiError as error:
            await _send_error(send, error)

    async def _read_body(self, receive) -> bytes:
        limit, chunks, size = self.settings.limits.max_body_bytes, [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ApiError(400, "client_disconnected", "the client left before its body arrived")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "body_too_large", f"the body is over the server's {limit:,} bytes: send less "
                               "per request (--max-body-bytes)")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _model_of(self, scope, body: bytes) -> str | None:
        """The body's `model`, else the query's `model`; None (the default model) when neither says."""
        if body:
            try:
                named = msgspec.json.decode(body, type=_Named).model
            except msgspec.DecodeError:  # not JSON, or `model` not a string: the model's app says what is wrong
                named = None
            if named is not None:
                return named
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return query.get("model", [None])[0]


def _replay(body: bytes, receive):
    """A `receive` that gives the body read already, then whatever the client sends (its hang-up)."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _send_error(send, error: ApiError) -> None:
    body = msgspec.json.encode({"error": {"message": error.message, "type": error_type(error.status),
                                          "code": error.code, "param": error.param}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_router_app(settings: Settings, config: RouterConfig, create_app=None) -> RouterApp:
    """The router in front of `config.models`; `create_app(settings)` builds one model's app (default: the
    server's `create_app`, what `spinfc serve` runs for one model)."""
    return RouterApp(settings, config, create_app or serve_app)
