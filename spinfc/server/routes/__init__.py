"""One small file per group of routes; `ROUTES` is what the app mounts."""

from spinfc.server.routes.health import healthz, readyz
from spinfc.server.routes.models import list_models
from spinfc.server.routes.score import score

ROUTES = [healthz, readyz, list_models, score]
