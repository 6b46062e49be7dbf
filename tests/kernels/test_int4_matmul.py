"""The W4A16 GEMM (interpreted, float32) against its PyTorch reference on fresh random weights: symmetric and
asymmetric, groups of 32/64/128, widths that are not a multiple of the tile, and views of a fused weight (the
row strides of `Int4Linear.split`); each row's result the same alone and packed with others (bit for bit on CUDA,
within the CPU's rounding here: the interpreter's products are NumPy's, whose BLAS picks kernels by row count)."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend.kernels import int4_matmul
from tests.rounding import assert_same_across_launches


def random_weight(K: int, N: int, group: int, asymmetric: bool, seed: int):
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (K // 8, 8, N), generator=g, dtype=torch.int32)
    packed = sum(q[:, j] << (4 * j) for j in range(8)).to(torch.int32)  # [K / 8, N]
    scales = torch.rand(K // group, N, generator=g) * 0.1 + 0.01
    zeros = torch.randint(-8, 8, (K // group, N), generator=g).float() if asymmetric else None
    return packed, scales, zeros


@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("asymmetric", [False, True])
def test_the_kernel_matches_the_reference(group, asymmetric):
    K, N, M = 256, 72, 9
    packed, scales, zeros = random_weight(K, N, group, asymmetric, seed=group + asymmetric)
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(7))
    got = int4_matmul.w4a16_matmul(x, packed, scales, zeros, group, torch.float32)
    want = int4_matmul.reference(x, packed, scales, zeros, group, torch.float32)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_the_dequantized_weight_is_q_minus_zero_times_scale():
    packed, scales, zeros = random_weight(64, 8, 32, True, seed=3)
    nibble = lambda k, n: int((packed[k // 8, n] >> (4 * (k % 8))) & 0xF) - 8  # noqa: E731
    weight = int4_matmul.dequantize(packed, scales, zeros, 32, torch.float32)  # [N, K]
    for n, k in ((0, 0), (5, 37), (7, 63)):
        assert float(weight[n, k]) == pytest.approx((nibble(k, n) - float(zeros[k // 32, n])) * float(scales[k // 32, n]))


def test_a_view_of_a_fused_weight_reads_its_own_columns():
    packed, scales, _ = random_weight(128, 160, 64, False, seed=4)
    x = torch.randn(5, 128, generator=torch.Generator().manual_seed(5))
    part = slice(32, 160)  # the second part of a fused weight: a view with the fused row stride
    got = int4_matmul.w4a16_matmul(x, packed[:, part], scales[:, part], None, 64, torch.float32)
    want = int4_matmul.reference(x, packed[:, part].contiguous(), scales[:, part].contiguous(), None, 64,
                                 torch.float32)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_a_row_is_the_same_alone_and_packed():
    packed, scales, zeros = random_weight(192, 40, 64, True, seed=6)
    x = torch.randn(140, 192, generator=torch.Generator().manual_seed(8))  # more rows than one tile
    packed_out = int4_matmul.w4a16_matmul(x, packed, scales, zeros, 64, torch.float32)
    for row in (0, 77, 139):
        alone = int4_matmul.w4a16_matmul(x[row:row + 1], packed, scales, zeros, 64, torch.float32)
        assert_same_across_launches(alone[0], packed_out[row], x.device)


def test_the_launcher_names_the_shapes_it_needs():
    packed, scales, _ = random_weight(64, 8, 32, False, seed=9)
    with pytest.raises(ValueError, match=r"needs packed \[8, N\] int32"):
        int4_matmul.w4a16_matmul(torch.randn(2, 64), packed, scales[:1], None, 32, torch.float32)


def test_a_width_that_is_not_a_multiple_of_the_tile():
    packed, scales, zeros = random_weight(96, 24, 32, True, seed=10)  # 96 = one and a half 64-wide steps
    x = torch.randn(3, 96, generator=torch.Generator().manual_seed(11))
    got = int4_matmul.w4a16_matmul(x, packed, scales, zeros, 32, torch.float32)
    torch.testing.assert_close(got, int4_matmul.reference(x, packed, scales, zeros, 32, torch.float32),
                               rtol=1e-5, atol=1e-4)
