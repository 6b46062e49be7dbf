"""Operations: taking a server out of a balancer, and its metrics.

    POST   /v0/drain   trusted token only: /readyz turns 503 draining and new work is refused (503 draining);
                       calls already admitted finish. Answers the state and how many calls are still in flight.
    DELETE /v0/drain   trusted token only: take work again
    GET    /metrics    Prometheus text (spinfc.metrics): requests, queue depth, passes, tokens, fill, latency
"""

from __future__ import annotations

from litestar import Request, Response, delete, get, post

from spinfc.metrics import CONTENT_TYPE
from spinfc.server.auth import require_trusted
from spinfc.server.schemas import DrainState
from spinfc.server.service import Service, ServiceDep


def drain_state(service: Service) -> DrainState:
    ready = service.status == "ready" and not service.draining
    status = "draining" if service.draining else "ready" if ready else "not_ready"
    return DrainState(status=status, draining=service.draining, in_flight=service.admission.active)


@post("/v0/drain", status_code=200, sync_to_thread=False)
def drain(service: ServiceDep, request: Request) -> DrainState:
    require_trusted(request, "POST /v0/drain")
    service.admission.drain()
    service.metrics.set_state(ready=False, draining=True)
    return drain_state(service)


@delete("/v0/drain", status_code=200, sync_to_thread=False)
def undrain(service: ServiceDep, request: Request) -> DrainState:
    require_trusted(request, "DELETE /v0/drain")
    service.admission.undrain()
    service.metrics.set_state(ready=service.status == "ready", draining=False)
    return drain_state(service)


@get("/metrics", sync_to_thread=False, media_type=CONTENT_TYPE)
def metrics(service: ServiceDep) -> Response[bytes]:
    engine = service.engine
    service.metrics.set_queue_depth(engine.stats.queued if engine is not None else 0)
    service.metrics.set_state(ready=service.status == "ready" and not service.draining, draining=service.draining)
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)
