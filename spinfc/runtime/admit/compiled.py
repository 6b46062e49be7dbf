"""What the engine's compile side hands its worker, and what a scored request hands back.

    Compiled   a request through the compiler's segment pass: one `Segment` per content (the floor included), each
               as the arrays the runner stages, and the map from a segment's reads to option scores
    Scored     a request once every segment has run: its scores per content, where they ran, what it cost
"""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import Program, Segment
from spinfc.runtime.admit.limits import processed_tokens
from spinfc.runtime.admit.score_map import ScoreMap
from spinfc.runtime.admit.segment_arrays import SegmentArrays
from spinfc.runtime.deliver.results import ContentScores, contents_results
from spinfc.runtime.extract.answers import Generated
from spinfc.wire.results import QueryResult


@attrs.frozen
class Compiled:
    """A request compiled against the engine's model and pass shape."""

    program: Program  # through the segment pass
    segments: tuple[Segment, ...]  # one per content, the floor included
    floor: int  # index of the floor content in program.contents
    inputs: tuple[int, ...]  # indices of the request's own contents, in request order
    arrays: tuple[SegmentArrays, ...]  # the segments as the runner stages them
    score_map: ScoreMap  # how a segment's reads sum into option logprobs
    extracts: bool = False  # whether it asks an extraction question (its passes keep their keys and values)
    floor_key: str = ""  # what its floor's scores depend on (`scheduler.floor_key`): the cache's key


@attrs.frozen
class Scored:
    compiled: Compiled
    scores: dict[int, ContentScores]  # content index -> [question][option] logprob
    processed_tokens: int  # rows this request put into passes (a reused floor costs none)
    floor_cached: bool
    placements: tuple = ()  # (pass, content index, start row, rows) of each of its segments, in the order run

    @property
    def input_tokens(self) -> int:
        """Usage's input tokens: every content (the floor included) and the question tree under it, as the request
        reads them, whether or not its floor's scores came from the cache (a request's count never depends on what
        ran before it; `processed_tokens` is what this one put into passes)."""
        return processed_tokens(self.compiled.program)

    @property
    def output_tokens(self) -> int:
        """Usage's output tokens: every token its `<gen>` slots drew, on every input."""
        return sum(len(entry.tokens) for c in self.compiled.inputs for entry in self.scores[c]
                   if isinstance(entry, Generated))

    def results(self) -> list[list[QueryResult]]:
        """Per input (request order), per query: the seed's result shape."""
        program, floor = self.compiled.program, self.scores[self.compiled.floor]
        return contents_results(program, [self.scores[c] for c in self.compiled.inputs], floor)
