"""Health, no token needed (auth.PUBLIC), each answering GET and HEAD (HEAD: the status alone):

    GET /healthz   200 while the process is up (the model may still be loading); /health is the same (the name
                   vLLM and TEI use)
    GET /livez     200 while the process is up and the model has not failed; ignores draining (a drained server
                   is alive); 503 model_failed otherwise
    GET /readyz    200 once the model is loaded and warm and the server is not draining; else 503 warming_up,
                   model_failed or draining: route traffic on it
"""

from __future__ import annotations

from litestar import HttpMethod, route

from spinfc.server.auth import PUBLIC
from spinfc.server.errors import ApiError
from spinfc.server.openapi import errors
from spinfc.wire.schemas import Health
from spinfc.server.service import ServiceDep


GET_HEAD = [HttpMethod.GET, HttpMethod.HEAD]


@route(["/healthz", "/health"], http_method=GET_HEAD, sync_to_thread=False, opt=PUBLIC)
def healthz(service: ServiceDep) -> Health:
    return Health(status="ok", model=service.model_name)


@route("/livez", http_method=GET_HEAD, sync_to_thread=False, opt=PUBLIC, responses=errors(503))
def livez(service: ServiceDep) -> Health:
    if service.status == "failed":
        service.ready_engine()  # 503 model_failed, with the reason
    return Health(status="alive", model=service.model_name)


@route("/readyz", http_method=GET_HEAD, sync_to_thread=False, opt=PUBLIC, responses=errors(503))
def readyz(service: ServiceDep) -> Health:
    service.ready_engine()  # 503 warming_up / model_failed until ready
    if service.draining:
        raise ApiError(503, "draining", "this server is draining (POST /v0/drain): calls in flight finish, new "
                       "ones are refused; DELETE /v0/drain puts it back")
    return Health(status="ready", model=service.model_name)
