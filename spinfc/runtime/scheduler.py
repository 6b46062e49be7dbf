"""The engine's units of work and its scheduler: which waiting segments, of any number of requests, go into the
next pass, the rows it launches with, and whether it goes now or waits for more.

A compiled request is one `Segment` per content (the compiler's `segment` pass). Every segment is a self-contained
block of rows (positions from 0, `end[]` never outside it, its reads inside it), so segments of any requests can
share a pass, each at a multiple of the block: a segment's rows, positions and mask relative to its own start are
the same wherever it lands, which is why a content's results do not depend on its neighbours.

`Scheduler` holds every decision about the next pass, over the engine's one `Shapes` value (the launch sizes chosen
at start-up, spinfc/shapes.py):

    next_pass           which waiting units it holds: `passes.plan_packing.fill`, the packer `spinfc compile
                        --emit plan` shows
    launch              the launch size (rows, answer rows, reads) they take: `Shapes.launch_for` of their rows
    full                whether they fill FULL of a pass (or of their launch size): launched behind a pass in flight,
                        or at once on an idle device
    room_for_one_more   whether waiting for one more content costs no launched rows (runtime/gather.py)
    waits_for_more      whether a pass on an idle device waits for requests on their way, and `longest_wait`
                        for how long at most

The engine's loop (runtime/engine.py) asks it; the runner stages each pass at `Shapes.launch_for` of what it holds,
so the size the scheduler decides on is the size that runs.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import threading

import attrs

from spinfc.ir.nodes import Program, Segment
from spinfc.passes.plan_packing import fill
from spinfc.runtime import gather
from spinfc.shapes import Shapes, round_up, used_rows


FULL = 0.85  # a pass this full is launched behind the one in flight; a less full one waits for it to end
# What one decode row (a beam fed one token, a generated token) counts for in pass rows against the queued-work
# bound: a CPU decode step of a few dozen rows costs about what a pass of a few hundred rows does.
DECODE_ROW_COST = 8


@attrs.define
class EngineStats:
    """Counters since an engine started, for health and metrics routes. The worker thread writes the pass
    counters; the request counters change under `lock`, from whichever thread ends a request."""

    passes: int = 0
    rows_used: int = 0  # rows holding a token, over all passes
    rows_total: int = 0  # rows launched over all passes (the budget each, or the used blocks when trimmed)
    reads: int = 0
    requests_done: int = 0
    requests_failed: int = 0
    floor_hits: int = 0
    floor_misses: int = 0
    queued: int = 0  # requests submitted and not yet answered (or given up)
    queued_tokens: int = 0  # rows of work admitted by the worker and not yet run (what admission bounds)
    rate: float | None = None  # rows per second of pass time, smoothed over recent passes (None before the first)
    decode_steps: int = 0  # extraction: model steps over all passes (runtime/extract/decode.py)
    decode_rows: int = 0  # extraction: beams fed over all steps
    queued_decode: int = 0  # extraction: decode rows admitted and not yet decoded, at most (extract/budget.py)
    decode_rate: float | None = None  # extraction: decode rows per second, smoothed (None before the first decode)
    lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def settled(self, future: concurrent.futures.Future) -> None:
        """Count a request's end, from whichever thread ends it."""
        with self.lock:
            self.queued -= 1
            if not future.cancelled() and future.exception() is not None:
                self.requests_failed += 1
            elif not future.cancelled():
                self.requests_done += 1

    def observe_pass(self, rows: int, seconds: float, smoothing: float = 0.3) -> None:
        """Count a pass of `rows` launched rows that took `seconds` (the measured rate admission's Retry-After uses)."""
        if seconds > 0:
            rate = rows / seconds
            self.rate = rate if self.rate is None else self.rate + smoothing * (rate - self.rate)

    def observe_decode(self, rows: int, seconds: float, smoothing: float = 0.3) -> None:
        """Count a pass's decode of `rows` beam rows that took `seconds` (its slices together)."""
        if seconds > 0 and rows > 0:
            rate = rows / seconds
            self.decode_rate = rate if self.decode_rate is None else self.decode_rate + smoothing * (
                rate - self.decode_rate)

    @property
    def fill_ratio(self) -> float:
        return self.rows_used / self.rows_total if self.rows_total else 0.0


# ---- the engine's units of work ----------------------------------------------------------------------------------


def floor_key(model, program: Program, floor: int) -> str:
    """What a floor's scores depend on: the weights, the floor content's tokens, and every question's tokens and
    option tokens in order (so question indices agree between requests that share the key)."""
    questions = tuple(
        (q.tokens, tuple(o.tokens for o in getattr(q.slot, "options", ()))) for q in program.questions
    )
    identity = getattr(model, "weights_hash", None) or model.name
    text = repr((identity, program.contents[floor].tokens, questions))
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.define(eq=False)
class Job:
    """One submitted request while it runs: the scores gathered so far and how many contents remain."""

    compiled: object  # engine.Compiled
    future: concurrent.futures.Future  # resolves to this Job once every content is scored
    scores: dict = attrs.field(factory=dict)  # content index -> ContentScores
    remaining: int = 0
    processed_tokens: int = 0
    floor_cached: bool = False
    placements: list = attrs.field(factory=list)  # (pass index, content index, start row, rows) of its segments

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
class Unit:
    """A segment waiting to run, and the (job, content) pairs that want its scores: one for an input, any number
    for a floor shared by requests with the same question set."""

    segment: Segment
    arrays: object  # runner.SegmentArrays
    score_map: object  # results.ScoreMap of the segment's program
    consumers: list[tuple[Job, int]]
    floor_key: str | None = None
    solo: bool = False  # run alone: it was in a pass that failed
    decode: int = 0  # decode rows it asks for at most (its request's extraction slots; 0 for a floor)

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


# ---- the scheduler ------------------------------------------------------------------------------------------------


def _item(unit: Unit) -> gather.Item:
    return unit.segment.length, unit.segment.rows, unit.segment.read_count


@attrs.frozen
class Scheduler:
    """Every decision about the next pass, over the engine's pass shapes (the module's docstring)."""

    shapes: Shapes

    def next_pass(self, units: list[Unit]) -> list[int]:
        """The indices of `units` in the next pass: a unit marked solo (its last pass failed) alone, else `fill`
        over the others, oldest first. Never empty when `units` is not (compile admits only segments that fit a
        pass)."""
        if units[0].solo:
            return [0]
        candidates = [i for i, unit in enumerate(units) if not unit.solo]
        return [candidates[k] for k in fill([units[i].segment for i in candidates], self.shapes)] or [0]

    def launch(self, units: list[Unit]) -> tuple[int, int, int] | None:
        """(rows, answer rows, reads) one pass of `units` launches with where shapes are fixed (the smallest launch
        size holding them); None where they are not fixed or `units` need more than a pass."""
        return gather.launch(list(map(_item, units)), self.shapes) if self.shapes.fixed else None

    def launch_rows(self, units: list[Unit]) -> int:
        """The rows a pass of `units` would launch with (the budget where they need a pass or more)."""
        launch = self.launch(units)
        return launch[0] if launch is not None else self.shapes.budget

    def full(self, units: list[Unit], of_launch: bool = False) -> bool:
        """Whether `units` fill FULL of a pass's rows (rounded up to the block), answer rows or reads; with
        `of_launch`, where shapes are fixed, of the launch size they would take (a full pass, where they need more
        than a pass)."""
        shapes = self.shapes
        used = used_rows([unit.segment.length for unit in units], shapes.block)
        rows = min(shapes.budget, round_up(max(used, 1), shapes.block))
        answer_rows = sum(unit.segment.rows for unit in units)
        reads = sum(unit.segment.read_count for unit in units)
        launch = self.launch(units) if of_launch else None
        T, R, N = launch if launch is not None else (shapes.budget, shapes.answer_rows, shapes.reads)
        return (rows >= FULL * T or (R is not None and answer_rows >= FULL * R)
                or (N is not None and reads >= FULL * N))

    def room_for_one_more(self, units: list[Unit]) -> bool:
        """Whether one more content like the largest queued would still run in the launch size `units` take
        (runtime/gather.py; a floor is shared, and not counted as a content)."""
        inputs = [_item(unit) for unit in units if unit.floor_key is None]
        return gather.room_for_one_more(list(map(_item, units)), inputs, self.shapes)

    def waits_for_more(self, units: list[Unit]) -> bool:
        """Whether a pass of `units` on an idle device is worth holding for requests on their way: it would not fill
        FULL of its launch size, and (where shapes are fixed) one more content would still run in that size."""
        return not self.full(units, of_launch=True) and (not self.shapes.fixed or self.room_for_one_more(units))

    def longest_wait(self, units: list[Unit], rate: float | None) -> float:
        """How long at most such a pass waits (seconds): half the time a pass of its launch size takes at `rate`
        rows per second, as measured (0.05 before any pass is)."""
        return 0.5 * self.launch_rows(units) / rate if rate else 0.05
