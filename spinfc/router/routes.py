"""The router's own routes (every other route is the model's, forwarded by `app.RouterApp`):

    GET  /v1/models          every configured model with its state (loading, ready, ...), features and limits
    GET  /v1/models/{id}     one of them (the OpenAI SDK's models.retrieve)
    POST /models/load        {"model": NAME}: load it now (waits as a request would), answers once it is ready
    POST /models/unload      {"model": NAME}, or {} for every model: unload once its requests have finished
    GET  /models/sse         `model_status` events (loading, ready, unloading, unloaded, failed), 5 s keepalives
    GET  /slots              each model's state, requests in flight, TTL, measured memory and load time
    GET  /healthz /readyz    200 while the router runs (models load on demand, so it is ready with none loaded)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

import msgspec
from litestar import Request, get, post
from litestar.params import Body, FromPath
from litestar.response import Stream

from spinfc.router.router import ModelSlot, Router
from spinfc.server.auth import PUBLIC
from spinfc.server.errors import ApiError
from spinfc.server.routes.chat import MAX_COMPLETION_TOKENS
from spinfc.server.routes.models import head_card, media_card, model_codes, route_features
from spinfc.wire.schemas import Health, ModelCard

KEEPALIVE_S = 5.0


class RoutedModelCard(ModelCard, kw_only=True):
    status: str  # unloaded | loading | ready | unloading | failed


class RoutedModelList(msgspec.Struct):
    object: str
    data: list[RoutedModelCard]


class ModelAction(msgspec.Struct, forbid_unknown_fields=True):
    model: str | None = None


class ModelState(msgspec.Struct):
    model: str
    status: str


def _router(request: Request) -> Router:
    return request.app.state.router


def card(slot: ModelSlot, created: int) -> RoutedModelCard:
    settings = slot.entry.settings
    service = slot.app.state.service if slot.app is not None else None
    aliases = service.aliases if service is not None else [settings.engine.model]
    shapes = service.engine.shapes if service is not None and service.engine else None
    limits = (service.settings if service is not None else settings).limits  # as the service serves them
    return RoutedModelCard(
        id=slot.name, object="model", created=created, owned_by="spinfc", aliases=aliases,
        ready=slot.state == "ready", status=slot.state, **head_card(service),
        features={"scoring": True, "extraction": settings.features.extraction and not model_codes(service),
                  "generation": settings.features.generation,
                  **route_features(settings, settings.features.generation)},
        limits={"token_budget": shapes.budget if shapes else settings.engine.resolved_budget(),
                **({"max_pass_rows": shapes.largest} if shapes else {}), **limits.as_dict(),
                "max_completion_tokens": MAX_COMPLETION_TOKENS},
        media=media_card(service) if service is not None else {},
    )


@get("/v1/models", sync_to_thread=False)
def list_models(request: Request) -> RoutedModelList:
    router = _router(request)
    return RoutedModelList("list", [card(slot, request.app.state.created) for slot in router.slots.values()])


@get("/v1/models/{model_id:str}", sync_to_thread=False)
def retrieve_model(request: Request, model_id: FromPath[str]) -> RoutedModelCard:
    router = _router(request)
    if model_id not in router.slots:
        raise ApiError(404, "model_not_found", f"no model {model_id!r} is configured here: GET /v1/models lists "
                       f"{', '.join(router.slots)}", param="model")
    return card(router.slots[model_id], request.app.state.created)


@post("/models/load", status_code=200)
async def load_model(request: Request, data: Annotated[ModelAction, Body()]) -> ModelState:
    router = _router(request)
    slot = router.slot(data.model)
    await router.load(slot)
    return ModelState(slot.name, slot.state)


@post("/models/unload", status_code=200)
async def unload_model(request: Request, data: Annotated[ModelAction, Body()]) -> list[ModelState]:
    router = _router(request)
    slots = [router.slot(data.model)] if data.model is not None else list(router.slots.values())
    for slot in slots:
        await router.unload(slot)
    return [ModelState(slot.name, slot.state) for slot in slots]


@get("/slots", sync_to_thread=False)
def slots(request: Request) -> list[dict]:
    return [slot.describe() for slot in _router(request).slots.values()]


@get("/models/sse")
async def model_events(request: Request) -> Stream:
    router = _router(request)
    queue = router.subscribe()

    async def events() -> AsyncIterator[bytes]:
        try:
            for slot in router.slots.values():  # where every model stands now, then what changes
                yield _event({"model": slot.name, "status": slot.state})
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield b": keepalive\n\n"
                    continue
                yield _event(event)
        finally:
            router.unsubscribe(queue)

    return Stream(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _event(data: dict) -> bytes:
    return b"event: model_status\ndata: " + msgspec.json.encode(data) + b"\n\n"


@get(["/healthz", "/health", "/livez", "/readyz"], sync_to_thread=False, opt=PUBLIC)
def health(request: Request) -> Health:
    return Health(status="ok", model=",".join(_router(request).slots))


ROUTES = [list_models, retrieve_model, load_model, unload_model, slots, model_events, health]
