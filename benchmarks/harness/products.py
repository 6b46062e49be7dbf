"""The sustained limit of a job: its linear products alone, every layer's, at the job's token count, captured in one
CUDA graph and replayed (no launch gaps, no host work, no other kernel): what the card sustains on exactly these
products, the ceiling a served pass is held against.

    products(snapshot)                  the products of a snapshot's layers, from its safetensors headers: one
                                        (K, N) per GEMM the stack runs, the projections that share an input fused
                                        as the stack fuses them (q/k/v, gate/up, Qwen3.5's in_proj_*)
    sustained_seconds(gemms, tokens, budget, scheme)
                                        the products of `tokens` rows (cut into passes of `budget` rows), timed
"""

from __future__ import annotations

import json
import re
import struct
from collections import defaultdict
from pathlib import Path

import torch

# output projections read their own input (attention's or the MLP's inner width); the rest of a block shares one
OUTPUTS = ("o_proj", "down_proj", "out_proj")


def _headers(snapshot: Path) -> dict[str, list[int]]:
    shapes = {}
    for file in sorted(Path(snapshot).glob("*.safetensors")):
        with file.open("rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(size))
        shapes.update({name: meta["shape"] for name, meta in header.items() if name != "__metadata__"})
    return shapes


def products(snapshot: Path) -> list[tuple[int, int]]:
    """(K, N) of every GEMM a token goes through, in layer order."""
    fused: dict[tuple[int, str, int], int] = defaultdict(int)  # (layer, group, K) -> N
    for name, shape in _headers(snapshot).items():
        found = re.match(r"model\.(?:language_model\.)?layers\.(\d+)\.(\w+)\.(\w+)\.weight$", name)
        if not found or len(shape) != 2 or shape[0] == 1 or shape[1] == 1:
            continue
        layer, block, projection = int(found[1]), found[2], found[3]
        group = f"{block}.{projection}" if projection in OUTPUTS else f"{block}.in"
        fused[(layer, group, shape[1])] += shape[0]
    return [(K, N) for (_, _, K), N in sorted(fused.items())]


def _operands(K: int, N: int, scheme: str, dtype: torch.dtype):
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * K**-0.5
    if scheme.startswith("fp8"):
        return w.to(torch.float8_e4m3fn), torch.rand(N, device="cuda")[None, :] + 0.5
    return w.to(dtype), None


def sustained_seconds(gemms: list[tuple[int, int]], tokens: int, budget: int, scheme: str,
                      dtype: torch.dtype = torch.float16, reps: int = 3) -> float:
    """Seconds for the products of `tokens` rows through `gemms`, the rows cut into passes of `budget` (the last
    pass holds the rest): fp8 schemes as `_scaled_mm` with row-wise scales (bf16 out), others in `dtype`."""
    passes = [budget] * (tokens // budget) + ([tokens % budget] if tokens % budget else [])
    weights = [_operands(K, N, scheme, dtype) for K, N in gemms]
    fp8 = scheme.startswith("fp8")
    inputs = {K: (torch.randn(budget, K, device="cuda") * 0.5).to(torch.float8_e4m3fn if fp8 else dtype)
              for K in {K for K, _ in gemms}}
    row_scales = torch.full((budget, 1), 0.01, device="cuda")

    def run():
        for rows in passes:
            for (K, N), (w, w_scale) in zip(gemms, weights):
                a = inputs[K][:rows]
                if fp8:  # each output freed at once: the capture's pool reuses its memory for the next
                    torch._scaled_mm(a, w.t(), scale_a=row_scales[:rows], scale_b=w_scale, out_dtype=torch.bfloat16,
                                     use_fast_accum=True)
                else:
                    torch.matmul(a, w.t())

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        run()  # warm: cuBLAS picks and loads its kernels before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    best = float("inf")
    for _ in range(reps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1000)
    del graph, weights
    torch.cuda.empty_cache()
    return best
