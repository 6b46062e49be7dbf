"""plan-packing: which segment goes in which pass, and where, by the packer the engine's scheduler runs.

`fill` is the scheduler's step: it picks the segments of the next pass from the work waiting, oldest first. The
pass runs `pack` (fill until nothing is left) over this program's segments in the order the engine queues a
request's work (the inputs in request order, then the floor; the floor first when a question extracts), so `spinfc compile --emit plan` shows the
passes a server runs for the request when it runs alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from spinfc.errors import ContentTooLong
from spinfc.ir.nodes import OptionSlot, Pass, Placement, Plan, Program, Segment
from spinfc.passes.context import PassContext
from spinfc.shapes import Shapes, round_up  # noqa: F401 (round_up re-exported)


def fill(segments: Sequence[Segment], shapes: Shapes) -> list[int]:
    """The indices of `segments` that go into one pass: first fit in the given order (so older work goes first),
    each segment at the next multiple of the block. Never exceeds the budget, the answer rows or the reads, but for
    a segment longer than the budget that comes first: it goes alone, in a pass of its own length up to
    `shapes.largest` (trimmed passes, the CPU)."""
    chosen, used, rows, reads = [], 0, 0, 0
    for i, segment in enumerate(segments):
        start = round_up(used, shapes.block)
        if start + segment.length > shapes.budget:
            if not chosen and segment.length <= shapes.largest:
                return [i]  # a content alone: nothing else joins its pass
            continue
        if shapes.answer_rows is not None and rows + segment.rows > shapes.answer_rows:
            continue
        if shapes.reads is not None and reads + segment.read_count > shapes.reads:
            continue
        chosen.append(i)
        used, rows, reads = start + segment.length, rows + segment.rows, reads + segment.read_count
    return chosen


def admits(segment: Segment, shapes: Shapes) -> bool:
    """Whether `segment` fits an empty pass at all."""
    return fill([segment], shapes) == [0]


def too_long(what: str, rows: int, shapes: Shapes, *, answer_rows: int = 0, tokens: int | None = None,
             **where) -> ContentTooLong:
    """The one refusal of work no pass holds (the planner's, the engine's intake, /v1/completions' prompts): `what`
    needs `rows` rows (`tokens` of them its content's, the rest its question tree) and `answer_rows`; `where` says
    which input (`content=`) or field (`param=`)."""
    parts = (f" ({tokens:,} content tokens + {rows - tokens:,} question-tree tokens)" if tokens is not None else "") + \
        (f" and {answer_rows} answer rows" if answer_rows else "")
    alone = f" (a content alone may take a pass of up to {shapes.largest:,} rows here)" \
        if shapes.largest > shapes.budget else ""
    return ContentTooLong(
        f"{what} needs {rows:,} rows{parts}, more than one pass holds ({shapes})",
        hint=f"raise the budget with --token-budget (a multiple of {shapes.block}, at least "
        f"{round_up(rows, shapes.block)}), shorten it{', or ask fewer questions' if answer_rows else ''}{alone}",
        **where)


def floor_first(program: Program) -> bool:
    """Whether the floor is queued ahead of the contents: when a question extracts (its decode on a content reads
    the floor's contexts, for floor_p)."""
    return any(not isinstance(q.slot, OptionSlot) for q in program.questions)


def queue_order(program: Program) -> list[int]:
    """The order the engine queues a program's segments: the contents in order, then the floor (first when
    `floor_first`)."""
    floors = [i for i, content in enumerate(program.contents) if content.is_floor]
    others = [i for i, content in enumerate(program.contents) if not content.is_floor]
    return floors + others if floor_first(program) else others + floors


def pack(segments: Sequence[Segment], shapes: Shapes) -> list[list[int]]:
    """`fill` until every segment is placed: per pass, the indices of `segments` it holds, in order."""
    waiting, passes = list(range(len(segments))), []
    while waiting:
        chosen = fill([segments[i] for i in waiting], shapes)
        if not chosen:
            raise ValueError(f"segment {segments[waiting[0]].content} fits no pass ({shapes})")
        passes.append([waiting[k] for k in chosen])
        taken = set(chosen)
        waiting = [i for k, i in enumerate(waiting) if k not in taken]
    return passes


def plan_packing(program: Program, ctx: PassContext) -> Program:
    """Fill `program.plan`: `pack` over the segments in queue order, each placement at the next multiple of the
    block after the one before. Guarantees: every content is placed exactly once and never split; placements end
    within the budget and respect the fixed answer rows and reads of `ctx.shapes`. Stats: passes, rows_used.
    Raises `ContentTooLong` for a content that does not fit an empty pass, saying what to change."""
    shapes = ctx.shapes
    segments = [program.segments[i] for i in queue_order(program)]
    for segment in segments:
        if not admits(segment, shapes):
            content = program.contents[segment.content]
            raise too_long(f"content {content.id!r}", segment.length, shapes, answer_rows=segment.rows,
                           tokens=len(content.tokens))
    passes = []
    for index, members in enumerate(pack(segments, shapes)):
        placements, start = [], 0
        for k in members:
            start = round_up(start, shapes.block)
            placements.append(Placement(segments[k].content, start, segments[k].length))
            start += segments[k].length
        passes.append(Pass(index, tuple(placements)))
    program = attrs.evolve(program, plan=Plan(shapes.budget, shapes.block, tuple(passes)))
    return program.with_stat("passes", len(passes)).with_stat("rows_used", sum(s.length for s in segments))
