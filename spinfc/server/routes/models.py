"""GET /v1/models: the served model, its aliases, whether it is ready, and the effective features (the routes that
are on among them) and limits.
GET /v1/models/{id}: that card alone (OpenAI's `models.retrieve`), under any name `model` accepts."""

from __future__ import annotations

import msgspec
from litestar import get
from litestar.params import FromPath

from spinfc.server.routes.chat import MAX_COMPLETION_TOKENS
from spinfc.server.errors import ApiError
from spinfc.server.openapi import error_spec, errors
from spinfc.wire.schemas import ModelCard, ModelList
from spinfc.server.service import ServiceDep
from spinfc.shapes import Shapes


@get("/v1/models", sync_to_thread=False, responses=errors(401))
def list_models(service: ServiceDep) -> ModelList:
    return ModelList(object="list", data=[model_card(service)])


# Litestar lists a 400 for any route with a path parameter; this one never sends it (every name is a string)
NEVER_400 = error_spec("not sent by this route: any name is read, and one this server does not serve is 404")


@get("/v1/models/{model_id:path}", sync_to_thread=False, responses={**errors(401, 404), 400: NEVER_400})
def retrieve_model(service: ServiceDep, model_id: FromPath[str]) -> ModelCard:
    name = model_id.lstrip("/")
    served = {service.model_name, service.settings.engine.model, *service.aliases}
    if name not in served:
        raise ApiError(404, "model_not_found", f"this server serves {service.model_name!r} (also called "
                       f"{', '.join(sorted(served - {service.model_name})) or 'nothing else'}), not {name!r}: "
                       "GET /v1/models lists it", param="model")
    return model_card(service)


def model_card(service) -> ModelCard:
    """The served model's card: its id (the first served name), aliases, readiness, its kind (a decision model's
    head reads its `codes`, listed in head order; a language model's the vocabulary), features and limits."""
    settings = service.settings
    return ModelCard(
        id=service.model_name, object="model", created=service.created, owned_by="spinfc",
        aliases=service.aliases, ready=service.status == "ready", **head_card(service),
        features={"scoring": True, "extraction": settings.features.extraction and not model_codes(service),
                  "generation": generation_available(service),
                  **route_features(settings, generation_available(service))},
        limits={**pass_limits(service), **settings.limits.as_dict(), "max_completion_tokens": MAX_COMPLETION_TOKENS},
        media=media_card(service),
    )


def route_features(settings, generates: bool) -> dict[str, bool]:
    """Which of the other surfaces are on: /v1/messages (always: it scores, and generates where `generation` is on),
    resumable streams (X-Conversation-Id, /v1/stream/{id}: off with --stream-count 0) and the cancel of a kept
    stream's generation (POST /v1/chat/completions/control: with resumable streams, where the model `generates`)."""
    kept = settings.server.stream_count > 0
    return {"messages": True, "resumable_streams": kept, "cancel": kept and generates}


def model_codes(service) -> tuple[str, ...]:
    """The served decision model's codes (empty for a language model, or before the model is loaded)."""
    return service.engine.codes if service is not None and service.engine is not None else ()


def head_card(service) -> dict:
    """What the model's head reads: `kind` "decision" with its `codes` (in head order), or "language" (the
    vocabulary)."""
    codes = model_codes(service)
    return {"kind": "decision", "codes": list(codes)} if codes else {"kind": "language", "codes": msgspec.UNSET}


def pass_limits(service) -> dict[str, int]:
    """`token_budget`: the rows a pass packs; `max_pass_rows`: the most rows one content with its questions may take
    (a content alone in a longer pass, where passes are trimmed: Shapes.largest), over which it is content_too_long."""
    shapes = service.engine.shapes if service.engine is not None else Shapes.for_settings(service.settings.engine)
    return {"token_budget": shapes.budget, "max_pass_rows": shapes.largest}


def generation_available(service) -> bool:
    """Whether /v1/chat/completions generates: --generation is on and the model can (once loaded)."""
    generator = service.generator
    return service.settings.features.generation and (generator is None or generator.available)


def media_card(service) -> dict:
    """The media requests may send (on the server and read by the model: `kinds`), what the model's towers read
    (`model_reads`), whether they are loaded, and the media limits."""
    features, reader = service.settings.features, service.media
    towers = reader.towers if reader is not None else None
    return {"kinds": sorted(reader.kinds) if reader is not None else [],
            "model_reads": sorted(towers.kinds) if towers is not None else [],
            "towers_loaded": towers is not None, "enabled": list(features.media_kinds()),
            "fetch_hosts": list(features.media_fetch_hosts)}
