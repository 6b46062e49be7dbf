"""A scoring request end to end, shared by /v1/score and the `scoring` block of /v1/chat/completions:

    body -> frontend program (+ the named packs' queries) -> features and limits -> the engine's shared passes
         -> per input: the request's own results, and each pack's results, categories and decision

The caller has checked the model and built the call's context; `score_body` holds an admission place while the
request is compiled and run (429 concurrency_limit beyond --queue, 503 draining).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import attrs

from spinfc.frontend import program_from_request
from spinfc.ir.nodes import GenerateSlot, OptionSlot, Program
from spinfc.runtime.engine import Scored
from spinfc.runtime.extract.budget import decode_work
from spinfc.runtime.results import QueryResult
from spinfc.server.context import CallContext
from spinfc.server.debug import plan_summary
from spinfc.server.errors import ApiError
from spinfc.runtime.limits import check_extractions, check_limits, check_prompts
from spinfc.server.per_input import answering
from spinfc.server.prechecks import Prechecks
from spinfc.runtime.request_packs import WithPacks, add_packs, resolve_packs, split_results
from spinfc.wire.schemas import PackResult
from spinfc.server.service import Service


INLINE_RESULTS = 2048  # (content, question) pairs whose results are built on the event loop itself (~1 us a pair)


@attrs.frozen
class ScoringOutcome:
    own: list[list[QueryResult]]  # per input, per own query
    packs: list[list[PackResult]]  # per input, per named pack
    scored: Scored
    questions: int  # (content, question) pairs answered, packs included, the floor not counted
    debug: dict | None
    kept: tuple[int, ...] | None = None  # with `inputs`: the indices of the inputs answered (`own` is theirs)
    failed: dict = attrs.field(factory=dict)  # with `inputs`: index -> ApiError of each input set aside


def check_features(program: Program, ctx: CallContext, where: Mapping[str, str] | None = None) -> None:
    """The one place a query is refused for a feature that is off, on the server (--no-extraction,
    --no-generation) or for this call (a trusted caller's `features`): 400 extraction_disabled for a searched slot
    (<*> <n> <$>), 400 generation_disabled for generated text (<gen>, or <*> with generate = true). `where` maps a
    query id to its JSON path (default `scoring.queries[i]`); a pack's queries point at the pack."""
    where = where or {query.id: f"scoring.queries[{k}]" for k, query in enumerate(program.queries)}
    for query in program.queries:
        if isinstance(query.slot, OptionSlot):
            continue
        generated = isinstance(query.slot, GenerateSlot)
        feature = "generation" if generated else "extraction"
        if ctx.features.get(feature, True):
            continue
        at = where[query.id]
        param = at if at.startswith("packs[") else f"{at}.template"
        if generated:
            raise ApiError(400, "generation_disabled", f"query {query.id!r} generates free text (<gen>), and "
                           "generation is turned off on this server (--no-generation) or for this call: ask with a "
                           "searched slot <*> or an option slot <?>, or ask the operator to turn generation on",
                           param=param)
        raise ApiError(400, "extraction_disabled", f"query {query.id!r} uses an extraction slot (<*> <n> <$>), and "
                       "extraction is turned off on this server (--no-extraction) or for this call: ask with an "
                       "option slot <?> and a list of options, or ask the operator to turn extraction on",
                       param=param)


async def score_body(service: Service, ctx: CallContext, body: dict, pack_ids: list[str],
                     prechecks: Prechecks | None = None) -> ScoringOutcome:
    """Score a /v1/score-shaped `body` (messages or inputs, scoring.queries) with the packs `pack_ids`, after the
    cheap `prechecks` (sizes and counts before any parsing). With `inputs`, an input that alone is wrong is set
    aside with its error and the others are answered (per_input.py)."""
    async def attempt(tried: dict) -> ScoringOutcome:
        if prechecks is not None:
            prechecks.score_body(tried)
        return await score_once(service, ctx, tried, pack_ids)

    if body.get("inputs") is None:
        return await attempt(body)
    outcome, kept, failed = await answering(body, attempt)
    return attrs.evolve(outcome, kept=tuple(kept), failed=failed)


async def score_once(service: Service, ctx: CallContext, body: dict, pack_ids: list[str]) -> ScoringOutcome:
    """`score_body` of every input of `body` together: any error is the request's."""
    engine = service.ready_engine()
    packs = resolve_packs(service.packs, pack_ids)
    many = body.get("inputs") is not None

    def frontend() -> WithPacks:
        program = program_from_request(body, model=engine.model.name)
        plan = add_packs(program, packs)
        check_features(plan.program, ctx, plan.where)
        check_extractions(plan.program, ctx.limits, plan.where)
        check_prompts(plan.program, ctx.limits)
        decoded = decode_work(plan.program, sum(not content.is_floor for content in plan.program.contents))
        if decoded:  # it decodes: the decode work ahead of it counts too
            service.admission.check_decode("extract", decoded)
        return plan

    built: list[WithPacks] = []

    def program() -> Program:
        built.append(frontend())
        return built[0].program

    with service.admission.admit():  # built, compiled and queued in one turn of the compile thread, in arrival order
        scored = await engine.compile_and_score(
            program, check=lambda program: check_limits(program, ctx.limits, many, where=built[0].where))
    plan = built[0]
    compiled = scored.compiled
    # the seed-shaped job's 1,344 (content, question) pairs take ~1.4 ms on a shared 2-core machine, and were
    # answered ~1 ms later built on a thread: its round trip through the event loop costs more than the loop waits
    # here (a burst's requests are answered one after another on it); larger results go off it
    small = len(compiled.inputs) * len(compiled.program.questions) <= INLINE_RESULTS
    per_input = scored.results() if small else await asyncio.to_thread(scored.results)
    split = [split_results(results, plan) for results in per_input]
    questions = len(compiled.program.questions) * len(compiled.inputs)
    service.metrics.observe_questions(questions)
    return ScoringOutcome(
        own=[own for own, _ in split], packs=[packs for _, packs in split], scored=scored, questions=questions,
        debug=plan_summary([scored], engine) if ctx.debug else None,
    )
