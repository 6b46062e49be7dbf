"""The idle GPU's launch-now rule (runtime/gather.py): its row count is the scheduler's, and it launches early only
where that costs no launched rows."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.passes.layout import used_rows
from spinfc.passes.plan_packing import fill
from spinfc.runtime.gather import launch_now_costs_nothing, launched_rows
from spinfc.shapes import Shapes

CUDA = Shapes.for_device("cuda:0", 19200, 64, 4)  # the served benchmark's: launched at 4,864 / 9,600 / 14,464 / 19,200
BURST = [(1229, 56, 112)] * 24  # 24 one-content requests of the seed-shaped job (~470 tokens, 56 questions)


def scheduled_rows(items, shapes: Shapes) -> int:
    """What the engine launches for `items` queued in order: `fill` pass after pass, each at its launch size."""
    left = [SimpleNamespace(length=length, rows=rows, reads=[0] * reads) for length, rows, reads in items]
    total = 0
    while left:
        chosen = fill(left, shapes)
        pass_ = [left[i] for i in chosen]
        total += shapes.launch_for(used_rows([s.length for s in pass_], shapes.block), sum(s.rows for s in pass_),
                                   sum(len(s.reads) for s in pass_))[0]
        left = [segment for i, segment in enumerate(left) if i not in set(chosen)]
    return total


item = st.tuples(st.integers(1, 6000), st.integers(1, 400), st.integers(1, 2000))


@settings(max_examples=200, deadline=None)
@given(st.lists(item, min_size=1, max_size=40), st.sampled_from([1, 2, 4, 8]))
def test_launched_rows_are_the_rows_the_scheduler_launches(items, sizes) -> None:
    shapes = Shapes.for_device("cuda:0", 19200, 64, sizes)
    assert launched_rows(items, shapes) == scheduled_rows(items, shapes)


def test_a_burst_of_one_content_requests_launches_once_two_are_queued() -> None:
    assert launched_rows(BURST, CUDA) == 19200 + 14464
    # one alone would cost rows: the other 23 then need 19,200 + 14,464 after its 4,864
    assert not launch_now_costs_nothing(BURST[:1], BURST[:1], 1, 23, CUDA)
    # two at 4,864 leave 22 for 19,200 + 9,600: the same 33,664 rows as all together, and the GPU starts now
    assert launch_now_costs_nothing(BURST[:2], BURST[:2], 2, 22, CUDA)
    assert launched_rows(BURST[:2], CUDA) + launched_rows(BURST[2:], CUDA) == launched_rows(BURST, CUDA)


def test_nothing_coming_launches_and_trimmed_passes_never_wait_for_rows() -> None:
    assert launch_now_costs_nothing(BURST[:1], BURST[:1], 1, 0, CUDA)
    trimmed = Shapes.for_device("cpu", 19200, 64)
    assert not launch_now_costs_nothing(BURST[:2], BURST[:2], 2, 22, trimmed)  # the gather's other rules decide


def test_requests_coming_are_guessed_like_the_largest_queued() -> None:
    large = (6000, 300, 600)
    # one large request queued and one more like it coming: 14,464 together, 9,600 + 9,600 apart: wait
    assert not launch_now_costs_nothing([large], [large], 1, 1, CUDA)
    small, larger = BURST[0], (2000, 56, 112)
    queued = [small, larger]
    # five more requests coming, guessed like `larger`: launching now would cost rows, so the pass waits
    assert not launch_now_costs_nothing(queued, queued, 2, 5, CUDA)
    # guessed like `small` (the first queued) they would not have: the guess is the largest, not the first
    later = [small] * 5
    assert launched_rows(queued, CUDA) + launched_rows(later, CUDA) <= launched_rows(queued + later, CUDA)
