"""GET /v1/models: the served model, its aliases, whether it is ready, and the effective features and limits."""

from __future__ import annotations

from litestar import get

from spinfc.server.schemas import ModelCard, ModelList
from spinfc.server.service import ServiceDep


@get("/v1/models", sync_to_thread=False)
def list_models(service: ServiceDep) -> ModelList:
    settings = service.settings
    card = ModelCard(
        id=service.model_name, object="model", created=service.created, owned_by="spinfc",
        aliases=service.aliases, ready=service.status == "ready",
        features={"scoring": True, "extraction": False, "generation": False},
        limits={"token_budget": service.engine.shape.budget if service.engine else settings.engine.resolved_budget(),
                **settings.limits.as_dict()},
    )
    return ModelList(object="list", data=[card])
