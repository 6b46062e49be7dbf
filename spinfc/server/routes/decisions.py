"""POST /v1/decisions (alias /v1/systemone): typed questions (noul, choice, score) over one shared state.

The body is checked (spinfc/wire/decisions.py, then `validate_decision_request`), each question becomes one option-slot
query (`decision_queries`), the request is checked against the call's policy and the queries are compiled into rounds
(runtime/decisions/rounds.py: one read of the state per round, usually one round), run in the engine's shared passes
(runtime/admit/scoring.py `score_compiled`), and the label probabilities become answers (`decision_answers`). Nothing is
generated: usage.output_tokens is 0. With `inputs`, every question is asked of each input and each is answered on
its own, an input that alone is wrong with its error (decision_inputs.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Annotated

import msgspec
from litestar import Request, post
from litestar.openapi.spec import Example
from litestar.params import Body

from spinfc.runtime.admit.scoring import score_compiled
from spinfc.runtime.decisions import decision_answers, decision_queries
from spinfc.runtime.decisions.rounds import check_decisions, compile_rounds
from spinfc.server.context import call_context
from spinfc.server.debug import plan_summary
from spinfc.server.decision_inputs import answer_inputs
from spinfc.server.errors import error_body
from spinfc.server.hangup import while_connected
from spinfc.server.openapi import BODY_ROUTE, errors
from spinfc.server.service import ServiceDep
from spinfc.wire.decisions import DecisionInputResult, DecisionRequest, DecisionResponse

SERVER_KEYS = ("limits", "features")
EXAMPLE = Example(summary="a noul, a choice and a score question about one state", value={
    "state": "Customer message: I was charged twice and nobody answers. Refund me now!",
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        "topic": {"type": "choice", "instructions": "What is the message about?",
                  "criteria": {"billing": "charges and refunds", "technical": "something broken"}},
        "anger": {"type": "score", "instructions": "How angry is the customer?",
                  "criteria": ["calm", "annoyed", "angry"]}}})


@post(["/v1/decisions", "/v1/systemone"], status_code=200, responses=errors(*BODY_ROUTE))
async def decisions(data: Annotated[DecisionRequest, Body(title="A decisions request", examples=[EXAMPLE])],
                    service: ServiceDep, request: Request) -> DecisionResponse:
    engine = service.ready_engine()
    ctx = call_context(request, data.limits, data.features)
    service.check_model(data.model)
    body = msgspec.to_builtins(data)
    if body.get("inputs") is not None:
        return await many_inputs(service, request, ctx, body)
    queries = decision_queries(body, extra_keys=SERVER_KEYS, codes=engine.codes)
    policy = ctx.policy(service.longest_token)
    check_decisions(policy, body, queries)  # sizes before anything is tokenized

    async def run() -> tuple[list, list]:
        with service.admission.admit():
            rounds = await compile_rounds(engine, body, queries, policy)
            return rounds, await score_compiled(engine, rounds)

    rounds, scored = await while_connected(request, service, run())  # a hang-up withdraws every round
    input_tokens = sum(part.input_tokens for part in scored)
    answer = decision_answers(body, await scored_results(scored), model=service.model_name, input_tokens=input_tokens,
                              codes=engine.codes)
    service.metrics.observe_questions(len(queries))
    response = msgspec.convert({
        **answer, "id": f"decision-{uuid.uuid4().hex}", "created": int(time.time()),
        "system_fingerprint": service.fingerprint, "rounds": len(rounds),
    }, DecisionResponse)
    if ctx.debug:
        response.debug = plan_summary(scored, engine)
    return response


async def scored_results(scored) -> dict:
    """Question id -> its result, over a content's rounds."""
    results = {}
    for part in scored:
        (first,) = await asyncio.to_thread(part.results)
        results.update((result.id, result) for result in first)
    return results


async def many_inputs(service, request: Request, ctx, body: dict) -> DecisionResponse:
    """The answer to a request with `inputs`: per input its answers, or its error (decision_inputs.py)."""
    engine = service.ready_engine()
    policy = ctx.policy(service.longest_token)

    async def run():
        with service.admission.admit():
            return await answer_inputs(engine, body, policy, extra_keys=SERVER_KEYS)

    answered, kept, failed = await while_connected(request, service, run())  # a hang-up withdraws every round
    results: dict[int, DecisionInputResult] = {}
    for index, (rounds, scored) in zip(kept, answered):
        answer = decision_answers(body, await scored_results(scored), codes=engine.codes)
        results[index] = msgspec.convert({"index": index, "answers": answer["answers"]}, DecisionInputResult)
    results.update((index, DecisionInputResult(index=index, error=error_body(error))) for index, error in failed.items())
    every = [part for _, scored in answered for part in scored]
    input_tokens = sum(part.input_tokens for part in every)
    service.metrics.observe_questions(len(body["questions"]) * len(kept))
    response = msgspec.convert({
        "object": "decision", "model": service.model_name, "id": f"decision-{uuid.uuid4().hex}",
        "created": int(time.time()), "system_fingerprint": service.fingerprint,
        "rounds": sum(len(rounds) for rounds, _ in answered),
        "usage": {"input_tokens": input_tokens, "output_tokens": 0, "total_tokens": input_tokens},
    }, DecisionResponse)
    response.inputs = [results[i] for i in range(len(body["inputs"]))]
    if ctx.debug:
        response.debug = plan_summary(every, engine)
    return response
