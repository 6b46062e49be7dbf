"""When the worker holds a part-empty pass for requests still arriving: while it would launch mostly empty. With
one launch size that is FULL of the budget; with launch sizes (CUDA), FULL of the size the pass would take, so a
pass that fills a smaller size well is launched rather than held."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spinfc.runtime.engine import Engine
from spinfc.runtime.schedule.sizing import FULL, PassSizing
from spinfc.shapes import Shapes


def _engine(shapes: Shapes) -> Engine:
    tokenizer = SimpleNamespace(pad_token_id=0)
    return Engine(SimpleNamespace(name="test", tokenizer=tokenizer), shapes, tokenizer=tokenizer)


def _units(*lengths: int):
    return [SimpleNamespace(segment=SimpleNamespace(length=n, rows=1, read_count=1)) for n in lengths]


def test_one_launch_size_is_full_at_FULL_of_the_budget():
    scheduler = PassSizing(Shapes.for_device("cuda:0", 16384, sizes=1))
    assert not scheduler.full(_units(4000), of_launch=True)
    assert scheduler.full(_units(int(FULL * 16384) + 128), of_launch=True)


def test_with_launch_sizes_a_pass_is_full_at_FULL_of_its_launch_size():
    scheduler = PassSizing(Shapes.for_device("cuda:0", 16384))  # 4096, 8192, 12288, 16384
    assert scheduler.full(_units(3800), of_launch=True)  # 93% of 4096: launched at that size
    assert not scheduler.full(_units(3800))  # of the budget it is not (what a pass behind one in flight needs)
    assert not scheduler.full(_units(4200), of_launch=True)  # 51% of 8192: worth waiting for more
    assert scheduler.full(_units(9000, 9000), of_launch=True)  # more than a pass


def test_trimmed_passes_are_full_of_the_budget_whatever_the_launch():
    scheduler = PassSizing(Shapes.for_device("cpu", 2048))  # the CPU: no launch sizes, a pass trimmed to its blocks
    assert scheduler.launch(_units(100)) is None and scheduler.launch_rows(_units(100)) == 2048
    assert not scheduler.full(_units(1000), of_launch=True) and scheduler.full(_units(1800), of_launch=True)
    assert scheduler.waits_for_more(_units(1000))  # a part-empty pass waits by the engine's other rules alone


def test_the_wait_is_half_a_pass_of_the_launch_size_it_would_take():
    scheduler = PassSizing(Shapes.for_device("cuda:0", 16384))
    assert scheduler.launch(_units(3000)) == (4096, 512, 4096)
    assert scheduler.longest_wait(_units(3000), rate=40_960.0) == 0.05  # 4,096 rows at 40,960 rows/s: 0.1 s a pass
    assert scheduler.longest_wait(_units(9000, 9000), rate=163_840.0) == 0.05  # more than a pass: the budget's
    assert scheduler.longest_wait(_units(3000), rate=None) == 0.05  # before any pass is measured


def test_a_request_counts_as_arriving_from_its_announcement_until_submitted_or_a_second(monkeypatch):
    from spinfc.runtime.admit import intake as module

    engine = _engine(Shapes.for_device("cuda:0", 16384))
    intake = engine.intake
    assert not intake.expecting
    intake.expect()
    assert intake.expecting
    intake.submitted(object())  # any submission takes the oldest announcement away
    assert not intake.expecting
    now = module.time.perf_counter()
    intake.expect()
    monkeypatch.setattr(module.time, "perf_counter", lambda: now + module.PENDING_SECONDS + 1)
    assert not intake.expecting  # never submitted (refused, say): it stops counting
    intake.close()


def test_an_announcement_withdrawn_stops_counting():
    engine = _engine(Shapes.for_device("cuda:0", 16384))
    handle = engine.intake.expect()
    assert engine.intake.expecting
    engine.intake.withdraw(handle)  # a refused request, or one that never needed the engine
    assert not engine.intake.expecting
    engine.intake.withdraw(handle)  # again: nothing
    engine.intake.close()


def test_non_finite_logprobs_fail_their_request_with_what_to_do():
    import numpy as np

    engine = _engine(Shapes.for_device("cuda:0", 16384))
    failed = []
    unit = SimpleNamespace(floor_key=None, segment=SimpleNamespace(length=10), decode=0, fail=failed.append,
                           score_map=SimpleNamespace(scores=lambda logprobs: pytest.fail("scored an overflow")))
    assert engine.scheduler._scores(unit, np.array([-1.0, float("inf")]), "fp16-mixed") is None
    assert len(failed) == 1 and "--dtype bfloat16" in str(failed[0])
    engine.intake.close()
