"""Candidate W4A16 GEMMs side by side at the Qwen3.5-27B products: speed, error against the dequantized float32
product, and row invariance (a row's bits the same when the other rows change and at every launch size).

    spinfc-triton    spinfc.backend.kernels.int4_matmul (one tile configuration for every launch)
    dequant-cublas   the weight dequantized to bf16 on every call, then cuBLAS (what a fallback would run)
    torch-tinygemm   torch's `_weight_int4pack_mm` (the int4 kernel torchao's Int4WeightOnly config calls on CUDA)
    gemlite          gemlite's GemLiteLinear (Triton; autotuned by launch size), where the wheel is installed

Used by gpu_int4.py (`compare`); `python -m benchmarks.int4_gemms` runs it alone on a GPU."""

from __future__ import annotations

import sys

import torch

from spinfc.backend.kernels.int4_reference import dequantize

GROUP = 128
# (name, K, N) of the 27B's row products (q with its gate is 2 x 24 x 256; the DeltaNet input projections fused)
PRODUCTS = (("qkv", 5120, 2 * 24 * 256 + 2 * 4 * 256), ("gate_up", 5120, 2 * 17408), ("down", 17408, 5120),
            ("in_all", 5120, 10240 + 6144 + 2 * 48), ("out_proj", 6144, 5120))


def random_int4(K: int, N: int, device, seed: int = 0):
    """(q [N, K] int8 in [-8, 7], packed [K / 8, N] int32, scales [K / G, N] bf16) of a random weight."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randint(-8, 8, (N, K), generator=g, dtype=torch.int8)
    nibbles = (q.to(torch.int32) + 8).reshape(N, K // 8, 8)
    packed = sum(nibbles[:, :, j] << (4 * j) for j in range(8)).to(torch.int32)  # [N, K / 8], lowest nibble first
    scales = (torch.rand(K // GROUP, N, generator=g) * 0.01 + 0.001).to(torch.bfloat16)
    return q.to(device), packed.t().contiguous().to(device), scales.to(device)


def candidates(q, packed, scales):
    """name -> f(x [M, K] bf16) -> [M, N] bf16, for every candidate this machine has."""
    from spinfc.backend.kernels.int4_matmul import w4a16_matmul

    found = {"spinfc-triton": lambda x: w4a16_matmul(x, packed, scales, None, GROUP, torch.bfloat16),
             "dequant-cublas": lambda x: x @ dequantize(packed, scales, None, GROUP, torch.bfloat16).t()}
    N, K = q.shape
    try:
        unsigned = (q.to(torch.int32) + 8).to(torch.uint8)
        tiny = torch.ops.aten._convert_weight_to_int4pack((unsigned[:, ::2] << 4 | unsigned[:, 1::2]).contiguous(), 8)
        scale_zero = torch.stack((scales, torch.zeros_like(scales)), dim=-1).contiguous()  # [K / G, N, 2]: w=(u-8)*s
        found["torch-tinygemm"] = lambda x: torch.ops.aten._weight_int4pack_mm(x, tiny, GROUP, scale_zero)
    except (RuntimeError, AttributeError, TypeError) as error:
        print(f"torch-tinygemm unavailable: {str(error).splitlines()[0]}", file=sys.stderr)
    try:
        from gemlite import DType, GemLiteLinear

        layer = GemLiteLinear(4, group_size=GROUP, in_features=K, out_features=N, input_dtype=DType.BF16,
                              output_dtype=DType.BF16)
        layer.pack((q.to(torch.int32) + 8).to(torch.uint8), scales.t().contiguous(),
                   torch.full_like(scales.t(), 8.0).contiguous(), None)
        found["gemlite"] = lambda x: layer(x)
    except Exception as error:  # an absent wheel or an API of another version: reported, not fatal
        print(f"gemlite unavailable: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
              file=sys.stderr)
    return found


def timed(fn, x, reps: int = 20) -> float:
    """Median ms of fn(x) after warm-up (CUDA events)."""
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def row_invariant(fn, x: torch.Tensor, sizes=(1, 7, 64, 512, 4096)) -> bool:
    """Whether rows of fn(x) keep their bits when the other rows change and at each launch size in `sizes`."""
    full = fn(x)
    other = x.clone()
    other[1::2] = torch.randn_like(other[1::2])
    if not torch.equal(fn(other)[::2], full[::2]):
        return False
    for M in sizes:
        if not torch.equal(fn(x[:M].contiguous()), full[:M]):
            return False
        shifted = torch.cat((torch.randn_like(x[:3]), x[:M]))  # the same rows 3 places later
        if not torch.equal(fn(shifted)[3:], full[:M]):
            return False
    return True


def compare(M: int = 16384, products=PRODUCTS) -> list[dict]:
    """One row per (product, candidate): ms at M rows, TFLOP/s, max |error| against the float32 product of the
    dequantized weight (relative to its largest value), and row invariance."""
    rows = []
    for name, K, N in products:
        q, packed, scales = random_int4(K, N, "cuda")
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        exact = (x.float() @ dequantize(packed, scales, None, GROUP, torch.float32).t())
        for label, fn in candidates(q, packed, scales).items():
            try:
                out = fn(x).float()
                ms = timed(fn, x)
                rows.append({"product": name, "K": K, "N": N, "M": M, "gemm": label, "ms": round(ms, 3),
                             "tflops": round(2 * M * N * K / ms / 1e9, 1),
                             "error": float((out - exact).abs().max() / exact.abs().max()),
                             "row_invariant": row_invariant(fn, x)})
            except Exception as error:  # a candidate that fails at this shape is reported as such
                rows.append({"product": name, "gemm": label, "failed": f"{type(error).__name__}: {error}"[:200]})
        del q, packed, scales, x, exact
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for row in compare():
        print(json.dumps(row))


if __name__ == "__main__":
    main()
