"""GET /v1/models: the served model, its aliases, whether it is ready, and the effective features and limits."""

from __future__ import annotations

from litestar import get

from spinfc.server.routes.chat import MAX_COMPLETION_TOKENS
from spinfc.server.openapi import errors
from spinfc.server.schemas import ModelCard, ModelList
from spinfc.server.service import ServiceDep


@get("/v1/models", sync_to_thread=False, responses=errors(401))
def list_models(service: ServiceDep) -> ModelList:
    settings = service.settings
    card = ModelCard(
        id=service.model_name, object="model", created=service.created, owned_by="spinfc",
        aliases=service.aliases, ready=service.status == "ready",
        features={"scoring": True, "extraction": settings.features.extraction,
                  "generation": generation_available(service)},
        limits={"token_budget": service.engine.shapes.budget if service.engine else settings.engine.resolved_budget(),
                **settings.limits.as_dict(), "max_completion_tokens": MAX_COMPLETION_TOKENS},
        media=media_card(service),
    )
    return ModelList(object="list", data=[card])


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
