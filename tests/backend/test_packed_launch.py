"""A packed launch (`launch.packed`): every tensor a view of one byte buffer, so one copy moves a pass's inputs (the
runner's pinned staging buffers into a CUDA graph's static inputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spinfc.backend.launch import packed, packed_bytes

FIELDS = ("tokens", "positions", "ends", "rows", "read_row", "read_token")


@pytest.mark.parametrize("shape", [(128, 16, 128), (4864, 608, 4864), (64, 8, 3)])
def test_the_views_tile_the_buffer_without_overlap(shape) -> None:
    T, R, N = shape
    block = torch.zeros(packed_bytes(T, R, N) + 40, dtype=torch.uint8)  # longer than needed, as a staging buffer is
    launch = packed(block, T, R, N)
    assert launch.block.numel() == packed_bytes(T, R, N)
    assert [getattr(launch, f).numel() for f in FIELDS] == [T, T, T, R, N, N]
    assert launch.ends.dtype == torch.int32 and all(getattr(launch, f).dtype == torch.int64 for f in FIELDS
                                                    if f != "ends")
    spans = sorted((getattr(launch, f).data_ptr() - block.data_ptr(), getattr(launch, f).nbytes) for f in FIELDS)
    assert spans[0][0] == 0 and all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))  # contiguous, disjoint
    assert spans[-1][0] + spans[-1][1] == packed_bytes(T, R, N)


def test_one_copy_of_the_block_moves_every_field() -> None:
    T, R, N = 256, 32, 200
    rng = np.random.default_rng(0)
    source = packed(torch.empty(packed_bytes(T, R, N), dtype=torch.uint8), T, R, N)
    values = {f: rng.integers(-2**31, 2**31 - 1, getattr(source, f).numel()) for f in FIELDS}
    for f in FIELDS:
        getattr(source, f).numpy()[:] = values[f]  # what staging writes, through NumPy views
    target = packed(torch.zeros(packed_bytes(T, R, N), dtype=torch.uint8), T, R, N)
    target.block.copy_(source.block)
    moved = source.to("cpu")
    for f in FIELDS:
        dtype = np.int32 if f == "ends" else np.int64
        assert np.array_equal(getattr(target, f).numpy(), values[f].astype(dtype)), f
        assert np.array_equal(getattr(moved, f).numpy(), values[f].astype(dtype)), f
