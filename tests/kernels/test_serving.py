"""What of `backend.serving` runs without a GPU: the one launch shape a CUDA server uses, and its dtype.
(Capture and a served request run on the GPU, in benchmarks/gpu_serve.py.)"""

from __future__ import annotations

import pytest

from spinfc.backend import serving
from spinfc.backend.graphs import LaunchShape


def test_launch_shape_fixes_answer_rows_and_reads_from_the_budget():
    assert serving.launch_shape(16384) == LaunchShape(16384, 2048, 16384)
    assert serving.engine_options(serving.launch_shape(1024)) == {"max_rows": 128, "max_reads": 1024, "trim": False}


def test_a_budget_the_kernels_cannot_run_is_refused_with_the_budgets_that_work():
    with pytest.raises(ValueError, match="--token-budget 16384 or 16512"):
        serving.launch_shape(16400)


def test_cuda_serves_half_precision():
    assert serving.cuda_dtype(None) == "bfloat16"
    assert serving.cuda_dtype("float32") == "float32"  # an explicit float32 is honoured on CUDA
    assert serving.cuda_dtype("float16") == "float16"
    assert serving.cuda_dtype("bfloat16") == "bfloat16"
