"""Telling the engine a scoring request is on its way before its body is read and parsed (`Intake.expect`), so a
pass about to run part-empty may wait for it (`Engine._gather`): a burst of small requests then shares passes.

    AnnounceScoring      an ASGI middleware: every POST to a route that may score is announced as it starts, and
                         withdrawn when it ends (answered or refused)
    withdraw(scope)      ends the announcement early: a route that finds, once it has read the body, that the request
                         will not use the engine's passes (a chat completion that generates) calls it, so no pass
                         waits for a request that never comes
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

SCORING_PATHS = frozenset({"/v1/score", "/v1/chat/completions", "/v1/messages", "/v1/decisions", "/v1/systemone"})
SCOPE_KEY = "spinfc.announcement"  # (intake, handle) of the request's announcement, in its ASGI scope


class AnnounceScoring(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        intake = None
        if scope.get("method") == "POST" and scope.get("path") in SCORING_PATHS:
            engine = getattr(getattr(scope["litestar_app"].state, "service", None), "engine", None)
            intake = getattr(engine, "intake", None)  # none while the model loads
        if intake is None:
            await next_app(scope, receive, send)
            return
        scope[SCOPE_KEY] = (intake, intake.expect())  # type: ignore[literal-required]
        try:
            await next_app(scope, receive, send)
        finally:
            withdraw(scope)


def withdraw(scope: Scope) -> None:
    """End the request's announcement, if it has one (a second call does nothing)."""
    announced = scope.pop(SCOPE_KEY, None)  # type: ignore[misc]
    if announced is not None:
        intake, handle = announced
        intake.withdraw(handle)
