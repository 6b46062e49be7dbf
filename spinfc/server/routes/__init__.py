"""One small file per group of routes; `ROUTES` is what the app mounts."""

from spinfc.server.routes.chat import chat_completions
from spinfc.server.routes.completions import completions
from spinfc.server.routes.decisions import decisions
from spinfc.server.routes.health import healthz, livez, readyz
from spinfc.server.routes.models import list_models, retrieve_model
from spinfc.server.routes.ops import drain, metrics
from spinfc.server.routes.packs import list_packs
from spinfc.server.routes.playground import ROUTES as PLAYGROUND
from spinfc.server.routes.score import score

ROUTES = [healthz, livez, readyz, list_models, retrieve_model, score, chat_completions, decisions, list_packs, drain, metrics]
ROUTES.append(completions)  # POST /v1/completions (OpenAI's legacy completions, with echo and logprobs)
ROUTES += PLAYGROUND  # GET / and /playground (the page and its assets), POST /v1/plan
