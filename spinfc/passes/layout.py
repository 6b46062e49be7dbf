"""layout: each pass as rows (token ids, positions, `end[]` for the tree mask, the answer rows), by `assemble`,
the function the engine's scheduler lays its passes out with."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from spinfc.ir.nodes import PassLayout, Program, Segment
from spinfc.passes.context import PassContext
from spinfc.shapes import Shapes, round_up, used_rows  # noqa: F401 (used_rows re-exported)


def pass_shape(lengths: Sequence[int], answer_rows: int, reads: int, shapes: Shapes) -> tuple[int, int, int]:
    """(T, R, N) a pass of segments of `lengths` (with `answer_rows` and `reads` in all) launches with
    (`Shapes.launch_for`): on CUDA the smallest launch size holding it, with its fixed answer rows and reads;
    trimmed, the used rows rounded up to the block."""
    return shapes.launch_for(used_rows(lengths, shapes.block), answer_rows, reads)


def assemble(segments: Sequence[Segment], shapes: Shapes, pad: int = 0, index: int = 0) -> PassLayout:
    """One pass holding `segments` in order, each at the next multiple of the block; padding rows hold `pad`,
    position 0 and end[j] = j + 1 (each sees only itself). Reads, prompt rows and content rows come in segment order,
    so a model's output splits by segment."""
    answer_rows = sum(len({r.row for r in s.reads} | {c.row for c in s.content_rows}) for s in segments)  # as lowered
    rows, _, _ = pass_shape([segment.length for segment in segments], answer_rows,
                            sum(len(segment.reads) for segment in segments), shapes)
    tokens, positions, ends = [pad] * rows, [0] * rows, list(range(1, rows + 1))
    spans, reads, prompt_rows, content_rows, used = [], [], [], [], 0
    for segment in segments:
        start = round_up(used, shapes.block)
        stop = start + segment.length
        if stop > rows:
            raise ValueError(f"segments need more than the pass's {rows} rows")
        tokens[start:stop] = segment.tokens
        positions[start:stop] = segment.positions
        ends[start:stop] = [end + start for end in segment.ends]
        reads.extend(attrs.evolve(read, row=read.row + start) for read in segment.reads)
        prompt_rows.extend(attrs.evolve(row, row=row.row + start) for row in segment.prompt_rows)
        content_rows.extend(attrs.evolve(row, row=row.row + start) for row in segment.content_rows)
        spans.append((start, stop))
        used = stop
    return PassLayout(index=index, budget=rows, tokens=tuple(tokens), positions=tuple(positions), ends=tuple(ends),
                      spans=tuple(spans), reads=tuple(reads), prompt_rows=tuple(prompt_rows),
                      content_rows=tuple(content_rows))


def layout(program: Program, ctx: PassContext) -> Program:
    """Fill `program.layouts`, one `PassLayout` per pass of the plan, by `assemble` over the pass's segments.
    Guarantees: a placed content of L tokens at rows [s, s + L + tree) has positions 0..L-1, `end` = the span's
    stop, and its tree below it (see the segment pass); rows outside every span are padding; spans are the
    placements'."""
    layouts = tuple(
        assemble([program.segments[p.content] for p in pss.placements], ctx.shapes, program.pad, pss.index)
        for pss in program.plan.passes
    )
    return attrs.evolve(program, layouts=layouts)
