"""GET /v1/packs: the packs this server enabled (bundled, --packs folders, git sources), where each came from, and
those skipped with why (the same list as `spinfc packs list`)."""

from __future__ import annotations

import msgspec
from litestar import get

from spinfc.server.openapi import errors
from spinfc.wire.schemas import PackList
from spinfc.server.service import ServiceDep


@get("/v1/packs", sync_to_thread=False, responses=errors(401))
def list_packs(service: ServiceDep) -> PackList:
    return msgspec.convert(service.packs.as_json(), PackList)
