"""A content longer than the budget, where passes are trimmed (the CPU), runs alone in a pass of its own length, up to
`Shapes.largest`; where shapes are fixed (CUDA) the budget stays the largest pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spinfc.backend import reference
from spinfc.errors import CompileError
from spinfc.ir import verify
from spinfc.passes import layout, plan_packing
from spinfc.passes.context import PassContext
from spinfc.runtime.launch.runner import Runner, SegmentArrays
from spinfc.shapes import LONE_PASS_ROWS, Shapes

from .programs import segmented, tokenized

LONE = Shapes(budget=256, block=16, trim=True, largest=1024)


def laid_out_with(lengths: list[int], shapes: Shapes):
    program = tokenized([[9] * (n - 1) for n in lengths], [([1], [[1]])], budget=shapes.budget, block=shapes.block)
    ctx = PassContext(shapes=shapes)
    return verify(layout(plan_packing(segmented(program), ctx), ctx))


def test_a_content_over_the_budget_takes_a_pass_of_its_own_and_the_others_pack_as_before():
    program = laid_out_with([100, 600, 120, 5], LONE)  # the last is the floor
    passes = [[pl.content for pl in pss.placements] for pss in program.plan.passes]
    assert passes == [[0, 2, 3], [1]]  # first fit in queue order; the long one alone
    assert [lay.budget for lay in program.layouts] == [256, 608]  # trimmed to the blocks used: 600 -> 608


def test_the_largest_pass_bounds_a_content_alone():
    with pytest.raises(CompileError) as caught:
        laid_out_with([100, 1100, 5], LONE)
    assert caught.value.code == "content_too_long"
    assert "a content alone may take a pass of up to 1,024 rows" in caught.value.hint


def test_fixed_shapes_keep_the_budget_as_the_largest_pass():
    cuda = Shapes.for_device("cuda:0", 2048)
    assert cuda.largest == cuda.budget == 2048
    cpu = Shapes.for_device("cpu", 2048)
    assert cpu.largest == LONE_PASS_ROWS and cpu.trim
    assert Shapes.for_device("cpu", 32768).largest == 32768  # a budget above it is its own largest pass
    with pytest.raises(ValueError, match="only where passes are trimmed"):
        Shapes(budget=256, block=16, largest=512)


def test_the_runner_stages_a_content_alone_longer_than_the_budget():
    program = laid_out_with([100, 600, 5], LONE)
    runner = Runner(model=None, shapes=LONE)
    arrays = SegmentArrays.of(program.segments[1])
    launch, pending = runner.stage([arrays])
    assert launch.tokens.shape[0] == 608 and pending.starts == [0]
    assert np.array_equal(launch.ends[600:].numpy(), np.arange(601, 609))  # padding rows see only themselves
    with pytest.raises(ValueError, match="do not fit"):  # with another content it must fit the budget
        runner.stage([arrays, SegmentArrays.of(program.segments[0])])


def test_the_lm_head_over_many_answer_rows_runs_in_slices_with_the_same_numbers():
    generator = torch.Generator().manual_seed(0)
    rows, vocab, width = reference.HEAD_ROWS + 300, 97, 16
    hidden = torch.randn(rows, width, generator=generator)
    head = torch.randn(vocab, width, generator=generator)
    read_row = torch.randint(0, rows, (5000,), generator=generator)
    read_token = torch.randint(0, vocab, (5000,), generator=generator)
    sliced = reference.answer_logprobs(hidden, head, read_row, read_token)
    whole = torch.log_softmax(hidden @ head.t(), dim=-1)[read_row, read_token]
    torch.testing.assert_close(sliced, whole, rtol=1e-5, atol=1e-5)


def test_a_content_limit_is_lowered_only_where_no_pass_holds_it_with_a_question():
    from spinfc.config import Limits
    from spinfc.runtime.admit.limits import limits_that_hold

    assert limits_that_hold(Limits(), LONE_PASS_ROWS) == Limits()  # the defaults hold on the CPU
    assert limits_that_hold(Limits(), 16384) == Limits()  # and at CUDA's default budget
    assert limits_that_hold(Limits(), 2048).max_content_tokens == 2048 - 256 - 5  # a CUDA budget of 2,048
