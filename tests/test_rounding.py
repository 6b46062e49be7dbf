"""The launches' comparison (tests/rounding.py): bit for bit on CUDA, within the CPU's rounding elsewhere, and a
failure names where the values part."""

from __future__ import annotations

import attrs
import pytest
import torch

from tests.rounding import CPU_TOLERANCE, assert_same_across_launches


@attrs.frozen
class Scores:
    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]


def test_the_cpu_allows_its_rounding_and_cuda_none():
    want = Scores((3, 4), (-4.5383114, -52.1438316))
    got = Scores((3, 4), (-4.5383114 + 4e-6, -52.1438316 - 52 * 4e-6))  # relative beyond 1
    assert_same_across_launches([got], [want], "cpu")
    with pytest.raises(AssertionError, match=r"\[0\]\.logprobs\[0\]: -4\.5383.* against -4\.5383114 \(allowed on cuda: nothing"):
        assert_same_across_launches([got], [want], "cuda")
    assert_same_across_launches([want], [Scores((3, 4), (-4.5383114, -52.1438316))], torch.device("cuda", 1))


def test_a_difference_past_the_tolerance_or_in_a_token_is_named():
    want = {"a": Scores((3, 4), (-1.0, -2.0))}
    with pytest.raises(AssertionError, match=r"\['a'\]\.logprobs\[1\]"):
        assert_same_across_launches({"a": Scores((3, 4), (-1.0, -2.0 + 3 * CPU_TOLERANCE))}, want, "cpu")
    with pytest.raises(AssertionError, match=r"\['a'\]\.tokens\[1\]: 5 against 4"):
        assert_same_across_launches({"a": Scores((3, 5), (-1.0, -2.0))}, want, "cpu")
    with pytest.raises(AssertionError, match=r"keys \['b'\] against \['a'\]"):
        assert_same_across_launches({"b": want["a"]}, want, "cpu")


def test_tensors_within_the_rounding_on_the_cpu_and_bit_for_bit_on_cuda():
    want = torch.tensor([[0.5, 12.0], [-3.0, 0.25]])
    got = want + torch.tensor([[5e-6, 12 * 5e-6], [0.0, 0.0]])
    assert_same_across_launches(got, want, "cpu")
    with pytest.raises(AssertionError, match=r"not bit for bit \(largest difference 6.*e-05 at \[0, 1\]"):
        assert_same_across_launches(got, want, "cuda")
    with pytest.raises(AssertionError, match=r"largest difference 0\.0001 at \[1, 1\]"):
        assert_same_across_launches(want + torch.tensor([[0.0, 0.0], [0.0, 1e-4]]), want, "cpu")
    with pytest.raises(AssertionError, match=r"\(2,\) torch.float32 against \(2, 2\)"):
        assert_same_across_launches(want[0], want, "cpu")
