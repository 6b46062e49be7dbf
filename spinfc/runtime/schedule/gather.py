"""How long an idle GPU's next pass waits for the requests still arriving.

Where shapes are fixed a pass costs what its launch size costs, full or part-empty, so while one more content
would still run in the launch size the queued work takes now, waiting for it costs no launched rows, and each
content it brings is one the passes after it need not hold. Once one more would need a larger launch (or another
pass), the pass goes: waiting longer would only delay the GPU. The content guessed is the largest queued.

Measured on an H200 with the served benchmark's burst (24 one-content requests of ~1,230 rows arriving over
~80 ms; launch sizes 4,864 / 9,600 / 14,464 / 19,200): launching whatever had compiled as soon as that looked
free against the requests announced so far sent one content alone at 4,864 rows while more were still arriving,
and the other 23 then needed 19,200 + 14,464 (38,528 rows in all); waiting while there is room sends three at
4,864, and the other 21 fit 19,200 + 9,600 (33,664 rows, what all 24 together take).
"""

from __future__ import annotations

from collections.abc import Sequence

from spinfc.shapes import Shapes, used_rows

Item = tuple[int, int, int]  # a segment's rows, answer rows and reads


def launch(items: Sequence[Item], shapes: Shapes) -> tuple[int, int, int] | None:
    """The launch size (rows, answer rows, reads: `Shapes.launch_for`) one pass of `items` takes (in order, each at a
    multiple of the block) where shapes are fixed, or None where they do not fit one pass."""
    used = used_rows([length for length, _, _ in items], shapes.block)
    answer_rows, reads = sum(item[1] for item in items), sum(item[2] for item in items)
    if used > shapes.budget or answer_rows > shapes.answer_rows or reads > shapes.reads:
        return None
    return shapes.launch_for(used, answer_rows, reads)


def launch_size(items: Sequence[Item], shapes: Shapes) -> int | None:
    """The rows of `launch`, or None where `items` do not fit one pass."""
    size = launch(items, shapes)
    return size[0] if size is not None else None


def room_for_one_more(queued: Sequence[Item], inputs: Sequence[Item], shapes: Shapes) -> bool:
    """Whether one more content like the largest of `inputs` (the queued contents' segments; a floor is shared and
    left out) would still run in the launch size `queued` takes now. Only where shapes are fixed (False otherwise:
    a trimmed pass costs what it holds, and the engine's gather waits there by its other rules alone)."""
    if not shapes.fixed or not queued or not inputs:
        return False
    now = launch_size(queued, shapes)
    guess = tuple(max(item[k] for item in inputs) for k in range(3))
    return now is not None and launch_size([*queued, guess], shapes) == now
