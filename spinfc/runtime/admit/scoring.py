"""The one scoring entry: a request and its policy in, each input's results out. The /v1/score route, the `scoring`
block of /v1/chat/completions and the bulk job's in-process transport all call `score`:

    request -> policy.check_request (sizes, counts) -> the named packs -> a place in the admission queue
            -> on the compile thread, in arrival order: frontend program + the packs' queries -> policy.check_asked
               (features, extractions, questions) -> its decode work admitted -> compile -> policy.check_compiled
               (every limit) -> queued
            -> the engine's shared passes -> per input: the request's own results, each pack's results,
               categories and decision

Two thinner forms share its parts: `plan` (POST /v1/plan) checks and compiles a request as `score` does, through the
packer, and scores nothing; `score_compiled` runs work checked and compiled already (the decision rounds,
runtime/decisions/rounds.py, whose checks count every round before any runs; `spinfc parity`'s jobs).

Every refusal of the request itself is a `RequestError` (policy.py, the frontend, the packs, the compiler); the
admission object raises its own (the server's 429 / 503). Nothing here knows HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import ContextManager, Protocol

import attrs
import msgspec

from spinfc import compiler
from spinfc.frontend import Pack, program_from_request
from spinfc.frontend.request_schema import ScoreRequest
from spinfc.ir.nodes import Program
from spinfc.runtime.admit.compiled import Compiled, Scored
from spinfc.runtime.admit.policy import Policy
from spinfc.runtime.admit.request_packs import WithPacks, add_packs, resolve_packs, split_results
from spinfc.runtime.extract.budget import decode_work
from spinfc.wire.results import QueryResult
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


@attrs.frozen
class Asked:
    """A request past `Policy.check_request`, with the packs it names: what `score` and `plan` build on a compile
    thread (`build`) and check once compiled (`check`)."""

    policy: Policy
    request: ScoreRequest | None  # None: `built`, a program with its packs' queries built already (the bulk job)
    built: WithPacks | None = None
    named: tuple[Pack, ...] = ()
    many: bool = True  # the request sent `inputs`

    def build(self, model: str) -> WithPacks:
        """The frontend's program with the packs' queries, checked by `Policy.check_asked`."""
        plan = self.built if self.built is not None else add_packs(program_from_request(self.request, model=model),
                                                                   self.named)
        self.policy.check_asked(plan.program, plan.where)
        return plan

    def check(self, compiled: Program, plan: WithPacks) -> None:
        """`Policy.check_compiled` on what `build` made, once compiled."""
        self.policy.check_compiled(compiled, self.many, plan.where)


def asked(request: ScoreRequest | WithPacks, policy: Policy, packs: Mapping | None = None) -> Asked:
    """`request` checked by `Policy.check_request` (a built program is not: its contents are the caller's) and its
    named packs resolved from the registry `packs`."""
    if isinstance(request, WithPacks):
        return Asked(policy, None, built=request)
    if request.packs == []:  # an empty `packs` names no pack: the request must ask its own questions
        request = msgspec.structs.replace(request, packs=None)
    policy.check_request(request)
    named = tuple(resolve_packs(packs, [ref.id for ref in request.packs])) if request.packs else ()
    return Asked(policy, request, named=named, many=request.inputs is not None)


async def score(engine, request: ScoreRequest | WithPacks, policy: Policy, *, packs: Mapping | None = None,
                admission: Admits | None = None) -> Answered:
    """Score `request` in `engine`'s shared passes under `policy`. `request` is the decoded request (`packs`: the
    registry its named packs are taken from, runtime/admit/request_packs.py), or a program built already with its packs'
    queries (the bulk job's rows, whose contents are read as `inputs`). `admission` holds a place for the request
    while it is compiled and run (none: no queue). Raises what the checks, the frontend, the compile or the run
    raise; any error is the whole request's (the server sets a bad input aside and tries the others again)."""
    checked = asked(request, policy, packs)
    plans: list[WithPacks] = []

    def program():  # on the compile thread: requests arriving together are built in arrival order
        plan = checked.build(engine.model.name)
        decoded = decode_work(plan.program, sum(not content.is_floor for content in plan.program.contents))
        if decoded and admission is not None:  # it decodes: the decode work ahead of it counts too
            admission.check_decode("extract", decoded)
        plans.append(plan)
        return plan.program

    with admission.admit() if admission is not None else contextlib.nullcontext():
        scored = await engine.compile_and_score(program, check=lambda compiled: checked.check(compiled, plans[0]))
    plan, compiled = plans[0], scored.compiled
    # the seed-shaped job's 1,344 (content, question) pairs take ~1.4 ms on a shared 2-core machine, and were
    # answered ~1 ms later built on a thread: its round trip through the event loop costs more than the loop waits
    # here (a burst's requests are answered one after another on it); larger results go off it
    small = len(compiled.inputs) * len(compiled.program.questions) <= INLINE_RESULTS
    per_input = scored.results() if small else await asyncio.to_thread(scored.results)
    split = [split_results(results, plan) for results in per_input]
    return Answered(own=[own for own, _ in split], packs=[packs for _, packs in split], scored=scored,
                    questions=len(compiled.program.questions) * len(compiled.inputs))


async def plan(engine, request: ScoreRequest, policy: Policy, *, packs: Mapping | None = None) -> Program:
    """`request` checked as `score` checks it and compiled through the packer as `spinfc compile --emit plan` runs
    it: the passes it would take alone (the engine's scheduler packs every request in flight together). Scores
    nothing, and holds no place in the engine's queue or on its compile thread (the engine would wait for it)."""
    checked = asked(request, policy, packs)

    def compiled() -> Program:
        built = checked.build(engine.model.name)
        return compiler.compile(built.program, engine.context, "plan-packing",
                                check=lambda program: checked.check(program, built))

    return await asyncio.to_thread(compiled)


async def score_compiled(engine, compiled: Sequence[Compiled]) -> list[Scored]:
    """Run requests checked and compiled already in `engine`'s shared passes, together. When one fails the others
    are withdrawn (not left running in the engine after the request has given back its admission place), and the
    first error is raised as it is."""
    tasks = [asyncio.ensure_future(engine.score(one)) for one in compiled]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
