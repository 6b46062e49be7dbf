"""Whether an idle GPU's next pass may launch now rather than wait for the requests still arriving.

Where shapes are fixed a pass costs what its launch size costs, full or part-empty, so waiting for more work only
pays when it lets the passes hold the work in fewer launched rows. Often it does not: 24 one-content requests of
~1,230 rows take 33,664 rows in any of 19,200 + 14,464, 9,600 + 19,200 + 4,864 or 4,864 + 19,200 + 9,600, so the
first of them may go at once at 4,864 rows, and the GPU starts while the others are still being parsed and
compiled rather than after. `launch_now_costs_nothing` compares the two, guessing each request still on its way
to be like the largest queued: the engine's gather (`Engine._gather`) stops waiting when launching now costs no
rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from spinfc.passes.plan_packing import round_up
from spinfc.shapes import Shapes

Item = tuple[int, int, int]  # a segment's rows, answer rows and reads


def launched_rows(items: Sequence[Item], shapes: Shapes) -> int:
    """The rows launched to run `items`: passes filled first fit in order (as `plan_packing.fill` fills them),
    each at the smallest launch size holding it."""
    total, left = 0, list(items)
    while left:
        used = rows = reads = 0
        rest: list[Item] = []
        for length, answer_rows, n in left:
            start = round_up(used, shapes.block)
            if start + length > shapes.budget or rows + answer_rows > shapes.answer_rows or reads + n > shapes.reads:
                rest.append((length, answer_rows, n))
                continue
            used, rows, reads = start + length, rows + answer_rows, reads + n
        if len(rest) == len(left):  # nothing fits an empty pass (compile refuses such a segment)
            return total + shapes.budget * len(rest)
        total += shapes.launch_for(used, rows, reads)[0]
        left = rest
    return total


def launch_now_costs_nothing(queued: Sequence[Item], inputs: Sequence[Item], requests: int, coming: int,
                             shapes: Shapes) -> bool:
    """Whether running `queued` (in queue order) in a pass of its own now, and the work of `coming` more requests
    after it, launches no more rows than waiting and packing them together. `inputs` are the queued contents'
    segments (the floors left out: a floor is shared), of `requests` requests; each coming request is guessed to
    bring as many, each as large as the largest queued. Only where shapes are fixed (a trimmed pass costs what it
    holds: waiting never saves rows)."""
    if not shapes.fixed or not queued or not inputs or requests < 1:
        return False
    if coming < 1:
        return True
    per_request = max(1, round(len(inputs) / requests))
    guess = tuple(max(item[k] for item in inputs) for k in range(3))
    later = [guess] * (coming * per_request)
    apart = launched_rows(queued, shapes) + launched_rows(later, shapes)
    return apart <= launched_rows(list(queued) + later, shapes)
