"""A scoring request over HTTP, shared by /v1/score and the `scoring` block of /v1/chat/completions: the runtime's
one scoring entry (runtime/admit/scoring.py: checks, packs, compile, shared passes, results) under the call's policy,
with what is the server's around it:

    admission   the runtime holds the server's admission place while the request is compiled and run (429
                concurrency_limit beyond --queue, 429 queue_full, 503 draining)
    inputs      with `inputs`, an input that alone is wrong is set aside with its error and the others are answered
                (per_input.py)
    metrics     the questions answered; `debug`, the plan, for a caller that may see it

The caller has checked the model and built the call's context.
"""

from __future__ import annotations

import attrs

from spinfc.frontend.request_schema import ScoreRequest
from spinfc.runtime.admit.scoring import Answered, score
from spinfc.server.context import CallContext
from spinfc.server.debug import plan_summary
from spinfc.server.per_input import answering
from spinfc.server.service import Service


@attrs.frozen
class ScoringOutcome:
    """The runtime's answer (`Answered`: results, packs, usage) and what the server adds to it."""

    answered: Answered
    debug: dict | None
    kept: tuple[int, ...] | None = None  # with `inputs`: the indices of the inputs answered (`own` is theirs)
    failed: dict = attrs.field(factory=dict)  # with `inputs`: index -> ApiError of each input set aside


async def score_request(service: Service, ctx: CallContext, request: ScoreRequest) -> ScoringOutcome:
    """Score the decoded `request` (messages or inputs, scoring.queries, packs) under the call's policy."""
    engine = service.ready_engine()
    policy = ctx.policy(service.longest_token)

    async def attempt(tried: ScoreRequest):
        return await score(engine, tried, policy, packs=service.packs, admission=service.admission)

    kept, failed = None, {}
    if request.inputs is None:
        answered = await attempt(request)
    else:
        answered, answered_inputs, failed = await answering(request, attempt)
        kept = tuple(answered_inputs)
    service.metrics.observe_questions(answered.questions)
    return ScoringOutcome(answered, plan_summary([answered.scored], engine) if ctx.debug else None, kept, failed)
