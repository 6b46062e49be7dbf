"""POST /v1/score: HTTP -> a compiled request (with its named packs) -> the engine's shared passes -> results."""

from __future__ import annotations

import time
import uuid
from typing import Annotated

import msgspec
from litestar import Request, post
from litestar.openapi.spec import Example
from litestar.params import Body

from spinfc.server.context import call_context
from spinfc.server.errors import error_body
from spinfc.server.openapi import BODY_ROUTE, errors
from spinfc.server.hangup import while_connected
from spinfc.wire.schemas import InputResult, ScoreRequest, ScoreResponse, Usage
from spinfc.server.scoring import ScoringOutcome, score_request
from spinfc.server.service import ServiceDep


EXAMPLE = Example(summary="one content, one two-option query", value={
    "messages": [{"role": "user", "content": "Customer message: I was charged twice, please refund one charge."}],
    "scoring": {"queries": [{"id": "refund", "template": "\n\nDoes the customer ask for a refund?\nAnswer:<?>",
                             "options": [" yes", " no"]}]}})


@post("/v1/score", status_code=200, responses=errors(*BODY_ROUTE))
async def score(data: Annotated[ScoreRequest, Body(title="A scoring request", examples=[EXAMPLE])], service: ServiceDep,
                request: Request) -> ScoreResponse:
    service.ready_engine()
    ctx = call_context(request, data.limits, data.features)
    service.check_model(data.model)
    work = score_request(service, ctx, data)  # the decoded request as it is: the runtime's one scoring entry
    outcome = await while_connected(request, service, work)  # a hang-up withdraws it from the engine
    return score_response(outcome, data.inputs is not None, bool(data.packs), service.model_name, service.fingerprint)


def score_response(outcome: ScoringOutcome, many: bool, packs: bool, model: str, fingerprint: str) -> ScoreResponse:
    """The answer to a request that sent `inputs` (`many`) or `messages`, naming packs or not."""
    answered = outcome.answered
    response = ScoreResponse(
        id=f"score-{uuid.uuid4().hex}", object="score", created=int(time.time()), model=model,
        system_fingerprint=fingerprint,
        usage=Usage(input_tokens=answered.scored.input_tokens, output_tokens=answered.scored.output_tokens,
                    questions=answered.questions),
    )
    if not many:
        response.results = answered.own[0]
        if packs:
            response.packs = answered.packs[0]
    else:
        kept = {index: k for k, index in enumerate(outcome.kept or range(len(answered.own)))}
        response.inputs = [
            InputResult(index=i, results=answered.own[kept[i]],
                        packs=answered.packs[kept[i]] if packs else msgspec.UNSET) if i in kept else
            InputResult(index=i, error=error_body(outcome.failed[i]))
            for i in range(len(kept) + len(outcome.failed))]
    if outcome.debug is not None:
        response.debug = outcome.debug
    return response
