"""The one scoring entry: a request and its policy in, each input's results out. The /v1/score route, the `scoring`
block of /v1/chat/completions and the bulk job's in-process transport all call `score`:

    request -> policy.check_request (sizes, counts) -> the named packs -> a place in the admission queue
            -> on the compile thread, in arrival order: frontend program + the packs' queries -> policy.check_asked
               (features, extractions, questions) -> its decode work admitted -> compile -> policy.check_compiled
               (every limit) -> queued
            -> the engine's shared passes -> per input: the request's own results, each pack's results,
               categories and decision

Every refusal of the request itself is a `RequestError` (policy.py, the frontend, the packs, the compiler); the
admission object raises its own (the server's 429 / 503). Nothing here knows HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import ContextManager, Protocol

import attrs
import msgspec

from spinfc.frontend import program_from_request
from spinfc.frontend.request_schema import ScoreRequest
from spinfc.runtime.compiled import Scored
from spinfc.runtime.extract.budget import decode_work
from spinfc.runtime.policy import Policy
from spinfc.runtime.request_packs import WithPacks, add_packs, resolve_packs, split_results
from spinfc.runtime.results import QueryResult
from spinfc.wire.schemas import PackResult

INLINE_RESULTS = 2048  # (content, question) pairs whose results are built on the event loop itself (~1 us a pair)


class Admits(Protocol):
    """What admits a request's work (the server's `Admission`): a place while it is compiled and run, and its decode
    work once the program shows it decodes. Either may refuse by raising."""

    def admit(self) -> ContextManager: ...

    def check_decode(self, kind: str, cost: int) -> None: ...


@attrs.frozen
class Answered:
    own: list[list[QueryResult]]  # per input, per own query
    packs: list[list[PackResult]]  # per input, per named pack
    scored: Scored
    questions: int  # (content, question) pairs answered, packs included, the floor not counted


async def score(engine, request: ScoreRequest | WithPacks, policy: Policy, *, packs: Mapping | None = None,
                admission: Admits | None = None) -> Answered:
    """Score `request` in `engine`'s shared passes under `policy`. `request` is the decoded request (`packs`: the
    registry its named packs are taken from, runtime/request_packs.py), or a program built already with its packs'
    queries (the bulk job's rows, whose contents are read as `inputs`). `admission` holds a place for the request
    while it is compiled and run (none: no queue). Raises what the checks, the frontend, the compile or the run
    raise; any error is the whole request's (the server sets a bad input aside and tries the others again)."""
    if isinstance(request, WithPacks):
        built, many = request, True
    else:
        if request.packs == []:  # an empty `packs` names no pack: the request must ask its own questions
            request = msgspec.structs.replace(request, packs=None)
        policy.check_request(request)
        named = resolve_packs(packs, [ref.id for ref in request.packs]) if request.packs else []
        built, many = None, request.inputs is not None
    plans: list[WithPacks] = []

    def program():  # on the compile thread: requests arriving together are built in arrival order
        plan = built if built is not None else add_packs(program_from_request(request, model=engine.model.name), named)
        policy.check_asked(plan.program, plan.where)
        decoded = decode_work(plan.program, sum(not content.is_floor for content in plan.program.contents))
        if decoded and admission is not None:  # it decodes: the decode work ahead of it counts too
            admission.check_decode("extract", decoded)
        plans.append(plan)
        return plan.program

    with admission.admit() if admission is not None else contextlib.nullcontext():
        scored = await engine.compile_and_score(
            program, check=lambda compiled: policy.check_compiled(compiled, many, plans[0].where))
    plan, compiled = plans[0], scored.compiled
    # the seed-shaped job's 1,344 (content, question) pairs take ~1.4 ms on a shared 2-core machine, and were
    # answered ~1 ms later built on a thread: its round trip through the event loop costs more than the loop waits
    # here (a burst's requests are answered one after another on it); larger results go off it
    small = len(compiled.inputs) * len(compiled.program.questions) <= INLINE_RESULTS
    per_input = scored.results() if small else await asyncio.to_thread(scored.results)
    split = [split_results(results, plan) for results in per_input]
    return Answered(own=[own for own, _ in split], packs=[packs for _, packs in split], scored=scored,
                    questions=len(compiled.program.questions) * len(compiled.inputs))
