"""What of `backend.serving` runs without a GPU: the one launch shape a CUDA server uses, and its dtype.
(Capture and a served request run on the GPU, in benchmarks/gpu_serve.py.)"""

from __future__ import annotations

import pytest

from spinfc.backend import serving
from spinfc.backend.graphs import LaunchShape
from spinfc.backend.kernels import tree_attention
from spinfc.shapes import CUDA_ROW_MULTIPLE, KERNEL_ALIGNMENT, Shapes, ShapeError


def test_launch_shape_fixes_answer_rows_and_reads_from_the_budget():
    assert serving.launch_shape(Shapes.for_device("cuda:0", 16384)) == LaunchShape(16384, 2048, 16384)
    assert Shapes.for_device("cuda", 1024) == Shapes(1024, 128, answer_rows=128, reads=1024, trim=False)
    assert Shapes.for_device("cpu", 1024) == Shapes(1024, 128, trim=True)
    with pytest.raises(ValueError, match="fixed pass shapes"):
        serving.launch_shape(Shapes.for_device("cpu", 1024))


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
    assert serving.cuda_dtype(None) == "bfloat16"
    assert serving.cuda_dtype("float32") == "float32"  # an explicit float32 is honoured on CUDA
    assert serving.cuda_dtype("float16") == "float16"
    assert serving.cuda_dtype("bfloat16") == "bfloat16"
