"""POST /v1/score: HTTP -> a compiled request -> the engine's shared passes -> the seed's result shape."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Annotated

from litestar import post
from litestar.params import Body

from spinfc.server.limits import check_limits
from spinfc.server.schemas import InputResult, ScoreRequest, ScoreResponse, Usage
from spinfc.server.service import ServiceDep


@post("/v1/score", status_code=200)
async def score(data: Annotated[ScoreRequest, Body(title="A scoring request")], service: ServiceDep) -> ScoreResponse:
    engine = service.ready_engine()
    service.check_model(data.model)
    limits = service.settings.limits
    compiled = await engine.compile_async(
        data.to_body(), check=lambda program: check_limits(program, limits, many_inputs=data.inputs is not None)
    )
    scored = await engine.score(compiled)
    per_input = await asyncio.to_thread(scored.results)
    usage = Usage(
        input_tokens=scored.processed_tokens, output_tokens=0,
        questions=len(compiled.program.questions) * len(compiled.inputs),
    )
    response = ScoreResponse(
        id=f"score-{uuid.uuid4().hex}", object="score", created=int(time.time()), model=service.model_name,
        system_fingerprint=service.fingerprint, usage=usage,
    )
    if data.inputs is None:
        response.results = per_input[0]
    else:
        response.inputs = [InputResult(index=i, results=results) for i, results in enumerate(per_input)]
    return response
