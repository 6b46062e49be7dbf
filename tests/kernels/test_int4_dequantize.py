"""The one-pass int4 dequantization (interpreted) against the reference's `dequantize`, bit for bit: symmetric and
asymmetric, groups of 32 and 128, widths that are not a multiple of the tile, and a view of a fused weight."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend.kernels import int4_dequantize

from .test_int4_matmul import random_weight


@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("asymmetric", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_weight_is_the_references_bit_for_bit(group, asymmetric, dtype, seed):
    K, N = 256, 72  # N is not a multiple of the 64-column tile
    packed, scales, zeros = random_weight(K, N, group, asymmetric, seed=seed)
    scales, zeros = scales.to(dtype), None if zeros is None else zeros.to(dtype)
    got = int4_dequantize.dequantize(packed, scales, zeros, group, dtype)
    want = int4_dequantize.reference(packed, scales, zeros, group, dtype)
    assert got.shape == (N, K) and got.dtype == dtype
    assert torch.equal(got, want)


def test_a_column_slice_of_a_fused_weight(seed):
    packed, scales, _ = random_weight(128, 160, 64, False, seed=seed)
    part = (packed[:, 32:96], scales[:, 32:96])  # rows keep their stride: a view, as `Int4Linear.split` makes
    with pytest.raises(ValueError, match="contiguous rows"):
        int4_dequantize.dequantize(packed.t().contiguous().t(), scales, None, 64, torch.float32)
    got = int4_dequantize.dequantize(*part, None, 64, torch.float32)
    assert torch.equal(got, int4_dequantize.reference(*part, None, 64, torch.float32))
