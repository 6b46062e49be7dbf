"""The Litestar app: `create_app(settings)` builds one app with its own `Service`; nothing is global.

The model loads in the lifespan as a background task (service.py), so /healthz answers while it loads and
/readyz turns 200 once a warm-up pass has run. The packs are read here, before the server starts: a pack source
that cannot be read raises `PackSourceError`, which refuses the start. Every route but health needs the bearer
token when the server has one (auth.py); every routed request is counted in the metrics (observe.py); a request
that may score is announced to the engine before its body is read (announce.py).
"""

from __future__ import annotations

from collections.abc import Callable

from litestar import Litestar
from litestar.di import Provide

from spinfc import __version__
from spinfc.config import Settings
from spinfc.metrics import Metrics
from spinfc.packsrc import PackRegistry, registry_from_settings
from spinfc.runtime.load.loader import load_default
from spinfc.server import docs_page
from spinfc.server.announce import AnnounceScoring
from spinfc.server.auth import require_token
from spinfc.server.body import BodyRequest
from spinfc.server.errors import exception_handlers
from spinfc.server.observe import RequestMetrics
from spinfc.server.openapi import exclusive_fields, forbid_unknown_fields, one_value
from spinfc.server.routes import ROUTES
from spinfc.server.routes.completions import ONE_VALUE
from spinfc.server.service import Service
from spinfc.wire import decisions as decision_schemas
from spinfc.wire import messages as messages_schemas
from spinfc.wire import schemas
from spinfc.wire import streams as streams_schemas


def create_app(settings: Settings | None = None, load_model: Callable = load_default,
               packs: PackRegistry | None = None) -> Litestar:
    """An app serving `settings.engine.model`; `load_model(name, dtype, device)` returns the runtime model;
    `packs` (default: the bundled packs and `settings.features.packs`) are the packs requests may name."""
    settings = settings or Settings()
    metrics = Metrics()
    packs = packs if packs is not None else registry_from_settings(settings)
    service = Service(settings, load_model=load_model, packs=packs, metrics=metrics)
    app = Litestar(
        request_max_body_size=settings.limits.max_body_bytes,
        request_class=BodyRequest,  # every body: media type, depth, strict types (body.py)
        route_handlers=[*ROUTES, docs_page.assets_router()],
        dependencies={"service": Provide(lambda: service, use_cache=True, sync_to_thread=False)},
        exception_handlers=exception_handlers(),
        guards=[require_token],
        middleware=[RequestMetrics(), AnnounceScoring()],
        lifespan=[service.lifespan],
        openapi_config=docs_page.openapi_config("spinfc", __version__),  # its page's assets served here, no CDN
    )
    # the schema says what body.py refuses
    forbid_unknown_fields(app, (schemas, decision_schemas, messages_schemas, streams_schemas))
    exclusive_fields(app)  # and which fields a body may not send together
    one_value(app, "CompletionRequest", ONE_VALUE)  # and which it honours at one value only
    app.state.service = service
    app.state.metrics = metrics
    return app
