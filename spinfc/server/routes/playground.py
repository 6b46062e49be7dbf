"""The playground: a page to try questions and packs on pasted text (docs/playground.md).

    GET  /                        a short page linking to the playground and the API's schema
    GET  /playground              the page (spinfc/server/playground/index.html)
    GET  /playground/{asset}      its script and style sheet, bundled in the package (no CDN)
    POST /v1/plan                 the plan of a /v1/score body, compiled but not scored: passes, tokens, saving

The page and its assets hold no data and are served to anyone; everything it shows comes from the API (/v1/packs,
/v1/score, /v1/plan), which the page calls with the token typed into it, so a server started with --token asks
the playground for it as it asks any client.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from litestar import Request, Response, get, post
from litestar.params import Body, PathParameter

from spinfc.ir.printer import one_sequence_per_question
from spinfc.runtime.admit import scoring
from spinfc.server.context import call_context
from spinfc.server.errors import ApiError
from spinfc.server.openapi import BODY_ROUTE, errors
from spinfc.server.service import ServiceDep
from spinfc.wire.schemas import ScoreRequest

ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
PUBLIC = {"public": True}

INDEX = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>spinfc</title></head>
<body style="font:15px system-ui,sans-serif;margin:2em"><h1>spinfc</h1>
<p>A compiler and server for bulk scoring with language models.</p>
<ul><li><a href="/playground">Playground</a>: try questions and packs on a text</li>
<li><a href="/schema">API schema</a></li><li><a href="/v1/packs">/v1/packs</a> (JSON)</li></ul></body></html>
"""


def _asset(name: str) -> str:
    return resources.files("spinfc.server.playground").joinpath(name).read_text(encoding="utf-8")


@get("/", include_in_schema=False, opt=PUBLIC, sync_to_thread=False)
def index() -> Response:
    return Response(INDEX, media_type="text/html; charset=utf-8")


@get("/playground", include_in_schema=False, opt=PUBLIC, sync_to_thread=False)
def playground() -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8")


@get("/playground/{asset:str}", include_in_schema=False, opt=PUBLIC, sync_to_thread=False)
def playground_asset(asset: Annotated[str, PathParameter()]) -> Response:
    if asset not in ASSETS:
        raise ApiError(404, "not_found", f"the playground has no file {asset!r}; it has {', '.join(ASSETS)}")
    return Response(_asset(asset), media_type=ASSETS[asset])


@post("/v1/plan", status_code=200, responses=errors(*BODY_ROUTE))
async def plan(data: Annotated[ScoreRequest, Body(title="A /v1/score body")], service: ServiceDep,
               request: Request) -> dict:
    """How the engine would run a /v1/score body: its passes, the tokens it reads, and what one sequence per
    question would read instead. Compiled, not scored; the same decoding and checks as /v1/score (the runtime's
    `scoring.plan`), so a body /v1/score refuses is refused here with the same answer."""
    engine = service.ready_engine()
    ctx = call_context(request, data.limits, data.features)
    service.check_model(data.model)
    program = await scoring.plan(engine, data, ctx.policy(service.longest_token), packs=service.packs)
    used = sum(p.used for p in program.plan.passes)
    baseline = one_sequence_per_question(program)
    return {"object": "plan", "passes": len(program.plan.passes), "budget": program.plan.budget,
            "contents": len(program.contents), "questions": len(program.questions), "tokens": used,
            "one_sequence_per_question_tokens": baseline, "saving": round(baseline / used, 3) if used else None,
            "stats": dict(program.stats)}


ROUTES = [index, playground, playground_asset, plan]
