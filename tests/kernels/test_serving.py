"""What of `backend.serving` runs without a GPU: the launch shapes a CUDA server uses, and its dtype.
(Capture and a served request run on the GPU, in the acceptance run: benchmarks/acceptance.)"""

from __future__ import annotations

import pytest

from spinfc.backend import serving
from spinfc.backend.graphs import LaunchShape
from spinfc.backend.kernels import tree_attention
from spinfc.shapes import CUDA_ROW_MULTIPLE, KERNEL_ALIGNMENT, Shapes, ShapeError


def test_launch_shapes_are_the_budgets_quarters_with_answer_rows_and_reads_from_the_rows():
    assert serving.launch_shapes(Shapes.for_device("cuda:0", 16384)) == [
        LaunchShape(4096, 512, 4096), LaunchShape(8192, 1024, 8192), LaunchShape(12288, 1536, 12288),
        LaunchShape(16384, 2048, 16384)]
    assert serving.launch_shapes(Shapes.for_device("cuda:0", 19200, 64)) == [
        LaunchShape(4864, 608, 4864), LaunchShape(9600, 1200, 9600), LaunchShape(14464, 1808, 14464),
        LaunchShape(19200, 2400, 19200)]  # each a multiple of 128 rows
    assert Shapes.for_device("cuda", 1024, sizes=1) == Shapes(1024, 128, answer_rows=128, reads=1024, trim=False,
                                                             sizes=(1024,))
    assert Shapes.for_device("cpu", 1024) == Shapes(1024, 128, trim=True, largest=16384)  # a content alone: up to 16,384
    assert Shapes.for_device("cuda", 768, block=192).sizes == (384, 768)  # multiples of both 128 and the block
    with pytest.raises(ValueError, match="fixed pass shapes"):
        serving.launch_shapes(Shapes.for_device("cpu", 1024))


def test_a_pass_launches_at_the_smallest_size_holding_its_rows_answer_rows_and_reads():
    shapes = Shapes.for_device("cuda:0", 16384)
    assert shapes.launch_for(4096, 512, 4096) == (4096, 512, 4096)
    assert shapes.launch_for(4097, 10, 10) == (8192, 1024, 8192)
    assert shapes.launch_for(100, 513, 10) == (8192, 1024, 8192)  # answer rows decide
    assert shapes.launch_for(100, 10, 12289) == (16384, 2048, 16384)  # reads decide
    with pytest.raises(ValueError, match="does not fit"):
        shapes.launch_for(16385, 1, 1)
    assert Shapes.for_device("cpu", 1024).launch_for(130, 7, 9) == (256, 7, 9)  # trimmed to the block


def test_a_budget_or_block_the_kernels_cannot_run_is_refused_with_the_values_that_work():
    with pytest.raises(ShapeError, match="--token-budget 16384 or 16512"):
        Shapes.for_device("cuda", 16400)
    with pytest.raises(ShapeError, match="--block 64 or 128"):
        Shapes.for_device("cuda", 16384, block=32)


def test_the_shapes_agree_with_the_kernels_constants():
    assert KERNEL_ALIGNMENT == tree_attention.ALIGNMENT
    block_m, block_n, *_ = tree_attention.blocks_for(128, 16384)
    assert KERNEL_ALIGNMENT % block_m == 0 and KERNEL_ALIGNMENT % block_n == 0  # a query block holds one content
    assert CUDA_ROW_MULTIPLE % block_m == 0


def test_cuda_serves_half_precision():
    assert serving.cuda_dtype(None) == "float16"  # fp16-mixed: within 0.05 of float32 where bf16-mixed was not
    assert serving.cuda_dtype("float32") == "float32"  # an explicit float32 is honoured on CUDA
    assert serving.cuda_dtype("float16") == "float16"
    assert serving.cuda_dtype("bfloat16") == "bfloat16"
