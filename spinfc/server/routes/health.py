"""GET /healthz (the process is up) and GET /readyz (200 once the model is loaded and warm, else 503)."""

from __future__ import annotations

from litestar import get

from spinfc.server.schemas import Health
from spinfc.server.service import ServiceDep


@get("/healthz", sync_to_thread=False)
def healthz(service: ServiceDep) -> Health:
    return Health(status="ok", model=service.model_name)


@get("/readyz", sync_to_thread=False)
def readyz(service: ServiceDep) -> Health:
    service.ready_engine()  # 503 warming_up / model_failed until ready
    return Health(status="ready", model=service.model_name)
