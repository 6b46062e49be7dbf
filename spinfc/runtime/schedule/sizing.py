"""What the next pass holds and the size it launches at, over the engine's one `Shapes` value (the launch sizes
chosen at start-up, spinfc/shapes.py); the scheduler (scheduler.py) asks it, and the runner stages each pass at
`Shapes.launch_for` of what it holds, so the size decided here is the size that runs.

A compiled request is one `Segment` per content (the compiler's `segment` pass). Every segment is a self-contained
block of rows (positions from 0, `end[]` never outside it, its reads inside it), so segments of any requests can
share a pass, each at a multiple of the block: a segment's rows, positions and mask relative to its own start are
the same wherever it lands, which is why a content's results do not depend on its neighbours.

    next_pass           which waiting units it holds: `passes.plan_packing.fill`, the packer `spinfc compile
                        --emit plan` shows
    launch              the launch size (rows, answer rows, reads) they take: `Shapes.launch_for` of their rows
    full                whether they fill FULL of a pass (or of their launch size): launched behind a pass in flight,
                        or at once on an idle device
    room_for_one_more   whether waiting for one more content costs no launched rows (runtime/schedule/gather.py)
    waits_for_more      whether a pass on an idle device waits for requests on their way, and `longest_wait`
                        for how long at most
"""

from __future__ import annotations

import attrs

from spinfc.passes.plan_packing import fill
from spinfc.runtime.schedule import gather
from spinfc.shapes import Shapes, round_up, used_rows

FULL = 0.85  # a pass this full is launched behind the one in flight; a less full one waits for it to end
# What one decode row (a beam fed one token, a generated token) counts for in pass rows against the queued-work
# bound: a CPU decode step of a few dozen rows costs about what a pass of a few hundred rows does.
DECODE_ROW_COST = 8


def _item(unit) -> gather.Item:
    return unit.segment.length, unit.segment.rows, unit.segment.read_count


@attrs.frozen
class PassSizing:
    """What a pass of queued units holds and launches at, over the engine's pass shapes (the module's docstring)."""

    shapes: Shapes

    def next_pass(self, units: list) -> list[int]:
        """The indices of `units` in the next pass: a unit marked solo (its last pass failed) alone, else `fill`
        over the others, oldest first. Never empty when `units` is not (compile admits only segments that fit a
        pass)."""
        if units[0].solo:
            return [0]
        candidates = [i for i, unit in enumerate(units) if not unit.solo]
        return [candidates[k] for k in fill([units[i].segment for i in candidates], self.shapes)] or [0]

    def launch(self, units: list) -> tuple[int, int, int] | None:
        """(rows, answer rows, reads) one pass of `units` launches with where shapes are fixed (the smallest launch
        size holding them); None where they are not fixed or `units` need more than a pass."""
        return gather.launch(list(map(_item, units)), self.shapes) if self.shapes.fixed else None

    def holds_prompts(self, lengths: list[int]) -> bool:
        """Whether prompts of `lengths` tokens (each at the next multiple of `Shapes.prompt_block`) fit one prompt
        pass's budget."""
        return used_rows(lengths, self.shapes.prompt_block) <= self.shapes.budget

    def launch_rows(self, units: list) -> int:
        """The rows a pass of `units` would launch with (the budget where they need a pass or more)."""
        launch = self.launch(units)
        return launch[0] if launch is not None else self.shapes.budget

    def full(self, units: list, of_launch: bool = False) -> bool:
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

    def room_for_one_more(self, units: list) -> bool:
        """Whether one more content like the largest queued would still run in the launch size `units` take
        (runtime/schedule/gather.py; a floor is shared, and not counted as a content)."""
        inputs = [_item(unit) for unit in units if unit.floor_key is None]
        return gather.room_for_one_more(list(map(_item, units)), inputs, self.shapes)

    def waits_for_more(self, units: list) -> bool:
        """Whether a pass of `units` on an idle device is worth holding for requests on their way: it would not fill
        FULL of its launch size, and (where shapes are fixed) one more content would still run in that size."""
        return not self.full(units, of_launch=True) and (not self.shapes.fixed or self.room_for_one_more(units))

    def longest_wait(self, units: list, rate: float | None) -> float:
        """How long at most such a pass waits (seconds): half the time a pass of its launch size takes at `rate`
        rows per second, as measured (0.05 before any pass is)."""
        return 0.5 * self.launch_rows(units) / rate if rate else 0.05
