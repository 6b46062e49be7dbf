"""Operations: taking a server out of a balancer, and its metrics.

    POST   /v0/drain   trusted token only: /readyz turns 503 draining and new work is refused (503 draining);
                       calls already admitted finish. Answers the state and how many calls are still in flight.
    DELETE /v0/drain   trusted token only: take work again
    GET    /metrics    Prometheus text (spinfc.metrics): requests, queue depth, passes, tokens, fill, latency
"""

from __future__ import annotations

from litestar import HttpMethod, Request, Response, get, route

from spinfc.metrics import CONTENT_TYPE
from spinfc.server.auth import require_trusted
from spinfc.server.openapi import errors
from spinfc.wire.schemas import DrainState
from spinfc.server.service import Service, ServiceDep


def drain_state(service: Service) -> DrainState:
    ready = service.status == "ready" and not service.draining
    status = "draining" if service.draining else "ready" if ready else "not_ready"
    return DrainState(status=status, draining=service.draining, in_flight=service.admission.active)


@route("/v0/drain", http_method=[HttpMethod.POST, HttpMethod.DELETE], status_code=200, sync_to_thread=False,
       responses=errors(401, 403))
def drain(service: ServiceDep, request: Request) -> DrainState:
    """POST: stop taking work (/readyz turns 503 draining); DELETE: take work again. Trusted token only.
    One handler for both, so that OPTIONS /v0/drain says `Allow: DELETE, OPTIONS, POST`."""
    require_trusted(request, f"{request.method} /v0/drain")
    if request.method == HttpMethod.POST:
        service.admission.drain()
        service.metrics.set_state(ready=False, draining=True)
    else:
        service.admission.undrain()
        service.metrics.set_state(ready=service.status == "ready", draining=False)
    return drain_state(service)


@get("/metrics", sync_to_thread=False, media_type=CONTENT_TYPE, responses=errors(401))
def metrics(service: ServiceDep) -> Response[bytes]:
    engine = service.engine
    service.metrics.set_queue_depth(engine.stats.queued if engine is not None else 0)
    service.metrics.set_state(ready=service.status == "ready" and not service.draining, draining=service.draining)
    return Response(service.metrics.render(), media_type=CONTENT_TYPE)
