"""The idle GPU's wait rule (runtime/schedule/gather.py): a pass waits for requests on their way only while one more content
would still run in its launch size, and its launch size is the scheduler's."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.passes.layout import used_rows
from spinfc.passes.plan_packing import fill
from spinfc.runtime.schedule.gather import launch_size, room_for_one_more
from spinfc.shapes import Shapes

CUDA = Shapes.for_device("cuda:0", 19200, 64, 4)  # the served benchmark's: launched at 4,864 / 9,600 / 14,464 / 19,200
ONE = (1229, 56, 112)  # one content of the seed-shaped job (~470 tokens, 56 questions)


def scheduled_size(items, shapes: Shapes) -> int | None:
    """The launch size of the scheduler's first pass over `items`, where it takes them all (else None)."""
    segments = [SimpleNamespace(length=length, rows=rows, read_count=reads) for length, rows, reads in items]
    chosen = fill(segments, shapes)
    if len(chosen) < len(segments):
        return None
    return shapes.launch_for(used_rows([s.length for s in segments], shapes.block), sum(s.rows for s in segments),
                             sum(s.read_count for s in segments))[0]


item = st.tuples(st.integers(1, 6000), st.integers(1, 400), st.integers(1, 2000))


@settings(max_examples=200, deadline=None)
@given(st.lists(item, min_size=1, max_size=12), st.sampled_from([1, 2, 4, 8]))
def test_the_launch_size_is_the_schedulers(items, sizes) -> None:
    shapes = Shapes.for_device("cuda:0", 19200, 64, sizes)
    assert launch_size(items, shapes) == scheduled_size(items, shapes)


def test_a_burst_waits_until_the_smallest_size_is_full_of_contents() -> None:
    assert room_for_one_more([ONE], [ONE], CUDA)  # two fit 4,864 rows
    assert room_for_one_more([ONE] * 2, [ONE] * 2, CUDA)  # three fit too
    assert not room_for_one_more([ONE] * 3, [ONE] * 3, CUDA)  # a fourth needs 9,600: go now, at 4,864
    assert launch_size([ONE] * 3, CUDA) == 4864 and launch_size([ONE] * 4, CUDA) == 9600
    # what that buys: the 21 left fit 19,200 + 9,600 (one alone first would leave 23 for 19,200 + 14,464)
    assert launch_size([ONE] * 15, CUDA) == 19200 and launch_size([ONE] * 6, CUDA) == 9600
    assert launch_size([ONE] * 8, CUDA) == 14464


def test_the_content_guessed_is_the_largest_queued_and_floors_are_left_out() -> None:
    large = (3000, 56, 112)
    assert not room_for_one_more([ONE, large], [ONE, large], CUDA)  # one more like `large` needs 9,600
    floor, small = (4000, 56, 112), (200, 8, 16)  # a shared floor in the pass is not guessed to come again
    assert room_for_one_more([floor, small], [small], CUDA)  # 4,032 + 256 + 200 rows still launch at 4,864
    assert not room_for_one_more([floor, small], [floor, small], CUDA)  # a second floor-sized one would not


def test_trimmed_passes_and_nothing_queued_never_wait_for_rows() -> None:
    trimmed = Shapes.for_device("cpu", 19200, 64)
    assert not room_for_one_more([ONE], [ONE], trimmed)  # the gather's other rules decide
    assert not room_for_one_more([], [], CUDA)
