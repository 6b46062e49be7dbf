"""Request metrics: an ASGI middleware that counts every routed request by route template and status, and times it.

It sits outside Litestar's per-route exception handler, so errors (401, 400, 429, 503) are counted with the status
the client got. Requests that match no route (404) never reach a route's middleware and are not counted.
"""

from __future__ import annotations

import time

from litestar.middleware import ASGIMiddleware
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send


class RequestMetrics(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        metrics = scope["litestar_app"].state.metrics
        route = scope.get("path_template") or "other"
        status = {"code": 500}
        started = time.perf_counter()

        async def send_and_note(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        metrics.in_flight.inc()
        try:
            await next_app(scope, receive, send_and_note)
        finally:
            metrics.in_flight.dec()
            metrics.observe_request(route, status["code"], time.perf_counter() - started)
