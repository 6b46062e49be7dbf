"""Several models behind one server (`spinfc serve --models models.toml`): loaded on their first request, swapped
out when memory does not hold them all, unloaded after their TTL, pinned while a request runs; see docs/router.md."""

from spinfc.router.app import RouterApp, create_router_app
from spinfc.router.config import RouterConfig, read_models

__all__ = ["RouterApp", "RouterConfig", "create_router_app", "read_models"]
