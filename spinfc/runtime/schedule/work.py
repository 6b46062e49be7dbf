"""What the engine's scheduler queues and what it hands the engine to do.

Queued (admitted by the scheduler, oldest first by `seq`):

    Job          a compiled request while it runs: its scores so far, how many contents remain
    Unit         a segment waiting to run, and the (job, content) pairs that want its scores (a floor: any number)
    PromptRead   a /v1/completions request's prompts, waiting for their token logprobs
    Generating   a generation (chat, /v1/completions) while it runs (turns.py)

Handed to the engine, one at a time (`Scheduler.schedule`); the engine runs it and gives the result back to
`Scheduler.deliver`:

    Pass         contents' segments in one forward pass (keeping their keys and values when they extract)
    Collect      wait for the pass in flight (an asynchronous device) and read its logprobs
    DecodeSlice  the next decode in turn runs until `enough` says its slice is over
    PromptPass   prompts of any number of completions in one pass: every token's logprob
    GenerateStep the next generation in turn draws one token
    Wait         nothing to launch now: wait for arrivals (`seconds` at most; None: until one comes), or for the
                 pass in flight (`flight`) to end
"""

from __future__ import annotations

import concurrent.futures
import hashlib
from collections.abc import Callable

import attrs

from spinfc.ir.nodes import Program, Segment


def floor_key(model, program: Program, floor: int) -> str:
    """What a floor's scores depend on: the weights, the floor content's tokens, and every question's tokens and
    option tokens in order (so question indices agree between requests that share the key)."""
    questions = tuple(
        (q.tokens, tuple(o.tokens for o in getattr(q.slot, "options", ()))) for q in program.questions
    )
    identity = getattr(model, "weights_hash", None) or model.name
    text = repr((identity, program.contents[floor].tokens, questions))
    return hashlib.sha256(text.encode()).hexdigest()


class _Settles:
    """A future settled once, whichever thread settles it (a cancelled one stays cancelled)."""

    future: concurrent.futures.Future

    @property
    def done(self) -> bool:
        """Answered, failed, or given up by its caller (a cancelled future)."""
        return self.future.done()

    def finish(self) -> None:
        try:
            self.future.set_result(self)
        except concurrent.futures.InvalidStateError:  # cancelled meanwhile
            pass

    def fail(self, error: Exception) -> None:
        try:
            self.future.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass


@attrs.define(eq=False)
class Job(_Settles):
    """One submitted request while it runs: the scores gathered so far and how many contents remain."""

    compiled: object  # compiled.Compiled
    future: concurrent.futures.Future  # resolves to this Job once every content is scored
    scores: dict = attrs.field(factory=dict)  # content index -> ContentScores
    remaining: int = 0
    processed_tokens: int = 0
    floor_cached: bool = False
    placements: list = attrs.field(factory=list)  # (pass index, content index, start row, rows) of its segments
    seq: int = 0  # arrival order (the scheduler's)


@attrs.define(eq=False)
class PromptRead(_Settles):
    """A completion request's prompts waiting for their token logprobs (`prompt_logprobs.PromptScores`, `top` most
    likely tokens each); `next` is the first prompt not yet in a pass. Resolves to itself once all are read."""

    prompts: list  # token tuples
    top: int
    future: concurrent.futures.Future
    scores: list = attrs.field(factory=list)
    next: int = 0
    remaining: int = 0
    seq: int = 0

    def wanted(self) -> bool:
        return not self.future.done()


@attrs.define(eq=False)
class Unit:
    """A segment waiting to run, and the (job, content) pairs that want its scores: one for an input, any number
    for a floor shared by requests with the same question set."""

    segment: Segment
    arrays: object  # segment_arrays.SegmentArrays
    score_map: object  # results.ScoreMap of the segment's program
    consumers: list[tuple[Job, int]]
    floor_key: str | None = None
    solo: bool = False  # run alone: it was in a pass that failed
    decode: int = 0  # decode rows it asks for at most (its request's extraction slots; 0 for a floor)

    @property
    def seq(self) -> int:
        return min(job.seq for job, _ in self.consumers)

    def wanted(self) -> bool:
        return any(not job.done for job, _ in self.consumers)

    def deliver(self, scores) -> None:
        for job, content in self.consumers:
            if job.done:
                continue
            job.scores[content] = scores
            job.remaining -= 1
            if job.remaining == 0:
                job.finish()

    def fail(self, error: Exception) -> None:
        for job, _ in self.consumers:
            job.fail(error)


# ---- the work the scheduler hands out --------------------------------------------------------------------------


@attrs.frozen(eq=False)
class Pass:
    units: list[Unit]
    extracts: bool  # its keys and values are kept for the decode (extraction_rows: where, per unit)
    extraction_rows: list = attrs.field(factory=list)


@attrs.frozen(eq=False)
class Collect:
    flight: object  # scheduler.Flight


@attrs.frozen(eq=False)
class DecodeSlice:
    decoding: object  # extract.scheduling.Decoding
    enough: Callable[[float], bool]  # after a launch: whether the slice is over (seconds so far)


@attrs.frozen(eq=False)
class PromptPass:
    reads: list  # per prompt in the pass: (PromptRead, prompt index)
    program: Program  # prompt_logprobs.prompt_program of those prompts
    top: int


@attrs.frozen(eq=False)
class GenerateStep:
    generating: object  # turns.Generating


@attrs.frozen(eq=False)
class Wait:
    seconds: float | None  # at most this long for an arrival (None: until one comes)
    flight: object = None  # or until this pass in flight has run


@attrs.frozen(eq=False)
class Launched:
    """A Pass's result: where it was launched (`runner.Pending`), and its logprobs once collected (at once on a
    synchronous device)."""

    pending: object
    logprobs: object = None


@attrs.frozen(eq=False)
class Failed:
    """Work that raised: the error, for its requests."""

    error: Exception
