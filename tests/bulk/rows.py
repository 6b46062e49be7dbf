"""Comparing two runs' rows on the CPU: every column the same, the float ones within the CPU reference's stated
tolerance (`spinfc parity`'s CROSS_CPU_TOLERANCE). Runs that differ in threads or process (a Ray actor has one
CPU, a server its own worker) agreed bit for bit on AMD EPYC and up to 2.4e-5 apart in a logprob on an Intel
Xeon: torch's CPU kernels choose their blocking per machine and thread count. Bit-identity is promised on CUDA."""

import pytest

from spinfc.runtime.parity import CROSS_CPU_TOLERANCE


def assert_rows_close(got: dict, want: dict) -> None:
    """`got` and `want`: rows by id; the same ids, columns and non-float values, the floats within tolerance."""
    assert got.keys() == want.keys()
    for key, row in got.items():
        other = want[key]
        assert row.keys() == other.keys(), key
        assert {c: v for c, v in row.items() if not isinstance(v, float)} == {
            c: v for c, v in other.items() if not isinstance(v, float)}, key
        assert {c: v for c, v in row.items() if isinstance(v, float)} == pytest.approx(
            {c: v for c, v in other.items() if isinstance(v, float)}, rel=0, abs=CROSS_CPU_TOLERANCE), key
