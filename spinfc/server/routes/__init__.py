"""One small file per group of routes; `ROUTES` is what the app mounts."""

from spinfc.server.routes.chat import chat_completions
from spinfc.server.routes.completions import completions
from spinfc.server.routes.control import control
from spinfc.server.routes.decisions import decisions
from spinfc.server.routes.health import healthz, livez, readyz
from spinfc.server.routes.models import list_models, retrieve_model
from spinfc.server.routes.ops import drain, metrics
from spinfc.server.routes.packs import list_packs
from spinfc.server.routes.playground import ROUTES as PLAYGROUND
from spinfc.server.routes.messages import messages
from spinfc.server.routes.score import score
from spinfc.server.routes.streams import delete_stream, lookup_stream, read_stream, stream_options

ROUTES = [healthz, livez, readyz, list_models, retrieve_model, score, chat_completions, decisions, list_packs, drain, metrics]
ROUTES.append(completions)  # POST /v1/completions (OpenAI's legacy completions, with echo and logprobs)
ROUTES += [messages]  # POST /v1/messages (Anthropic's Messages API, with the same `scoring` block as chat)
# kept streams (X-Conversation-Id) and cancel; the path's OPTIONS before its methods, so Litestar adds none of its own
ROUTES += [lookup_stream, stream_options, read_stream, delete_stream, control]
ROUTES += PLAYGROUND  # GET / and /playground (the page and its assets), POST /v1/plan
