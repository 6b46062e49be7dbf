"""Packing work from many requests into shared passes.

The compiler lays out each request on its own (`passes.run` -> `PassLayout`s). Every placed content is a
self-contained block of rows: its positions restart at 0, its `end[]` never points outside it, and its answer reads
fall inside it. So the engine can cut a request's passes back into `Segment`s (one content with its question tree,
rows counted from 0) and place segments from any number of requests into one pass, each at a multiple of the block.
A segment's rows, positions and mask relative to its own start are the same wherever it lands, which is why a
content's results do not depend on its neighbours.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import hashlib
import threading
from collections.abc import Sequence

import attrs

from spinfc.ir.nodes import AnswerRead, PassLayout, Program, PromptRow, Question

PAD_TOKEN = 0  # padding rows see only themselves and are never read, so any id will do


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@attrs.frozen
class Segment:
    """One content and its question tree, cut out of a compiled pass; rows, `ends` and read rows count from 0."""

    content: int  # the content's index in its program
    tokens: tuple[int, ...]
    positions: tuple[int, ...]
    ends: tuple[int, ...]
    reads: tuple[AnswerRead, ...]
    prompt_rows: tuple[PromptRow, ...] = ()  # where extraction questions start decoding (rows from 0)

    @property
    def length(self) -> int:
        return len(self.tokens)

    @property
    def rows(self) -> int:
        """Distinct answer rows: what the LM head computes for this segment."""
        return len({read.row for read in self.reads})


def cut_segments(layouts: Sequence[PassLayout]) -> list[Segment]:
    """Every placed content of `layouts` as a `Segment`, in the order of the passes and their spans.

    Guarantees: each segment holds exactly the rows of its span and every read of its span, shifted to start at 0;
    raises ValueError when a span's mask reaches outside it or its reads name more than one content (a layout bug)."""
    segments = []
    for layout in layouts:
        starts = [start for start, _ in layout.spans]
        by_span: list[list[AnswerRead]] = [[] for _ in layout.spans]
        prompts_by_span: list[list[PromptRow]] = [[] for _ in layout.spans]
        for rows, items in ((by_span, layout.reads), (prompts_by_span, layout.prompt_rows)):
            for item in items:
                k = bisect.bisect_right(starts, item.row) - 1
                if k < 0 or item.row >= layout.spans[k][1]:
                    raise ValueError(f"pass {layout.index}: row {item.row} lies in no content span")
                rows[k].append(item)
        for (start, stop), reads, prompts in zip(layout.spans, by_span, prompts_by_span):
            ends = tuple(end - start for end in layout.ends[start:stop])
            if any(not (j < end <= stop - start) for j, end in enumerate(ends)):
                raise ValueError(f"pass {layout.index}: the mask of span [{start}, {stop}) reaches outside it")
            contents = {read.content for read in reads} | {prompt.content for prompt in prompts}
            if len(contents) != 1:
                raise ValueError(f"pass {layout.index}: span [{start}, {stop}) reads contents {sorted(contents)}")
            segments.append(Segment(
                content=contents.pop(),
                tokens=tuple(layout.tokens[start:stop]),
                positions=tuple(layout.positions[start:stop]),
                ends=ends,
                reads=tuple(attrs.evolve(read, row=read.row - start) for read in reads),
                prompt_rows=tuple(attrs.evolve(prompt, row=prompt.row - start) for prompt in prompts),
            ))
    return segments


@attrs.frozen
class PassShape:
    """The limits of one pass: rows (the token budget), the block every segment starts on, and optional fixed
    counts of answer rows and reads (for launches of one fixed shape). With `trim` a pass launches only the
    blocks it uses (for the CPU, where an empty row costs as much as a full one and shapes need not be fixed)."""

    budget: int
    block: int = 128
    max_rows: int | None = None
    max_reads: int | None = None
    trim: bool = False

    def admits(self, segment: Segment) -> bool:
        """Whether `segment` fits an empty pass of this shape at all."""
        return fill([segment], self) == [0]


def fill(segments: Sequence[Segment], shape: PassShape) -> list[int]:
    """The indices of `segments` that go into one pass: first fit in the given order (so older work goes first),
    each segment at the next multiple of the block. Never exceeds the budget, the answer rows or the reads."""
    chosen, used, rows, reads = [], 0, 0, 0
    for i, segment in enumerate(segments):
        start = round_up(used, shape.block)
        if start + segment.length > shape.budget:
            continue
        if shape.max_rows is not None and rows + segment.rows > shape.max_rows:
            continue
        if shape.max_reads is not None and reads + len(segment.reads) > shape.max_reads:
            continue
        chosen.append(i)
        used, rows, reads = start + segment.length, rows + segment.rows, reads + len(segment.reads)
    return chosen


def assemble(segments: Sequence[Segment], shape: PassShape, index: int = 0) -> PassLayout:
    """One pass holding `segments` in order, each at the next multiple of the block; padding rows hold PAD_TOKEN,
    position 0 and end[j] = j + 1. The reads come in segment order, so a model's output splits by segment.
    The pass has `shape.budget` rows, or with `shape.trim` the used rows rounded up to the block."""
    used = 0
    for segment in segments:
        used = round_up(used, shape.block) + segment.length
    rows = min(shape.budget, round_up(max(used, 1), shape.block)) if shape.trim else shape.budget
    tokens = [PAD_TOKEN] * rows
    positions = [0] * rows
    ends = list(range(1, rows + 1))
    spans, reads, prompts, used = [], [], [], 0
    for segment in segments:
        start = round_up(used, shape.block)
        stop = start + segment.length
        if stop > rows:
            raise ValueError(f"segments need more than the pass's {shape.budget} rows")
        tokens[start:stop] = segment.tokens
        positions[start:stop] = segment.positions
        ends[start:stop] = [end + start for end in segment.ends]
        reads.extend(attrs.evolve(read, row=read.row + start) for read in segment.reads)
        prompts.extend(attrs.evolve(prompt, row=prompt.row + start) for prompt in segment.prompt_rows)
        spans.append((start, stop))
        used = stop
    return PassLayout(
        index=index, budget=rows, tokens=tuple(tokens), positions=tuple(positions), ends=tuple(ends),
        spans=tuple(spans), reads=tuple(reads), prompt_rows=tuple(prompts),
    )


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
    decode_steps: int = 0  # extraction: model steps over all passes (runtime/extract/decode.py)
    decode_rows: int = 0  # extraction: beams fed over all steps
    lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def settled(self, future: concurrent.futures.Future) -> None:
        """Count a request's end, from whichever thread ends it."""
        with self.lock:
            self.queued -= 1
            if not future.cancelled() and future.exception() is not None:
                self.requests_failed += 1
            elif not future.cancelled():
                self.requests_done += 1

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
    questions: tuple[Question, ...]
    consumers: list[tuple[Job, int]]
    floor_key: str | None = None
    solo: bool = False  # run alone: it was in a pass that failed

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
