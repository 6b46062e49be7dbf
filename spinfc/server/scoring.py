"""A scoring request end to end, shared by /v1/score and the `scoring` block of /v1/chat/completions:

    body -> frontend program (+ the named packs' queries) -> features and limits -> the engine's shared passes
         -> per input: the request's own results, and each pack's results, categories and decision

The caller has checked the model and built the call's context; `score_body` holds an admission place while the
request is compiled and run (429 concurrency_limit beyond --queue, 503 draining).
"""

from __future__ import annotations

import asyncio

import attrs

from spinfc.frontend import program_from_request
from spinfc.ir.nodes import OptionSlot, Program
from spinfc.runtime.engine import Scored
from spinfc.runtime.results import QueryResult
from spinfc.server.context import CallContext
from spinfc.server.debug import plan_summary
from spinfc.server.errors import ApiError
from spinfc.server.limits import check_extractions, check_limits, check_prompts
from spinfc.server.request_packs import WithPacks, add_packs, resolve_packs, split_results
from spinfc.server.schemas import PackResult
from spinfc.server.service import Service


@attrs.frozen
class ScoringOutcome:
    own: list[list[QueryResult]]  # per input, per own query
    packs: list[list[PackResult]]  # per input, per named pack
    scored: Scored
    questions: int  # (content, question) pairs answered, packs included, the floor not counted
    debug: dict | None


def check_features(program: Program, ctx: CallContext) -> None:
    """400 extraction_disabled for an extraction slot when the server (or this call) turned extraction off."""
    if ctx.features.get("extraction", True):
        return
    for k, query in enumerate(program.queries):
        if not isinstance(query.slot, OptionSlot):
            raise ApiError(400, "extraction_disabled", f"query {query.id!r} uses an extraction slot, and extraction "
                           "is turned off on this server (--no-extraction): ask with an option slot <?>",
                           param=f"scoring.queries[{k}].template")


async def score_body(service: Service, ctx: CallContext, body: dict, pack_ids: list[str]) -> ScoringOutcome:
    """Score a /v1/score-shaped `body` (messages or inputs, scoring.queries) with the packs `pack_ids`."""
    engine = service.ready_engine()
    packs = resolve_packs(service.packs, pack_ids)
    many = body.get("inputs") is not None

    def frontend() -> WithPacks:
        program = program_from_request(body, model=engine.model.name)
        check_features(program, ctx)
        check_extractions(program, ctx.limits)
        plan = add_packs(program, packs)
        check_prompts(plan.program, ctx.limits)
        return plan

    with service.admission.admit():
        plan = await asyncio.to_thread(frontend)
        compiled = await engine.compile_program_async(
            plan.program, check=lambda program: check_limits(program, ctx.limits, many, where=plan.where))
        scored = await engine.score(compiled)
    per_input = await asyncio.to_thread(scored.results)
    split = [split_results(results, plan) for results in per_input]
    questions = len(compiled.program.questions) * len(compiled.inputs)
    service.metrics.observe_questions(questions)
    return ScoringOutcome(
        own=[own for own, _ in split], packs=[packs for _, packs in split], scored=scored, questions=questions,
        debug=plan_summary([scored], engine) if ctx.debug else None,
    )
