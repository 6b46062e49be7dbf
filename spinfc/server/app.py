"""The Litestar app: `create_app(settings)` builds one app with its own `Service`; nothing is global.

The model loads in the lifespan as a background task (service.py), so /healthz answers while it loads and
/readyz turns 200 once a warm-up pass has run.
"""

from __future__ import annotations

from collections.abc import Callable

from litestar import Litestar
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from spinfc import __version__
from spinfc.config import Settings
from spinfc.server.errors import exception_handlers
from spinfc.server.routes import ROUTES
from spinfc.server.service import Service, load_default


def create_app(settings: Settings | None = None, load_model: Callable = load_default) -> Litestar:
    """An app serving `settings.engine.model`; `load_model(name, dtype, device)` returns the runtime model."""
    settings = settings or Settings()
    service = Service(settings, load_model=load_model)
    app = Litestar(
        request_max_body_size=settings.limits.max_body_bytes,
        route_handlers=ROUTES,
        dependencies={"service": Provide(lambda: service, use_cache=True, sync_to_thread=False)},
        exception_handlers=exception_handlers(),
        lifespan=[service.lifespan],
        openapi_config=OpenAPIConfig(title="spinfc", version=__version__),
    )
    app.state.service = service
    return app
