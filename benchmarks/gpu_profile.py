"""Where a scheme's time goes, in one run on one H200: the products of one Llama-3-8B layer in each way the GPU can
run them (bf16, fp16, fp8 with row-wise or per-tensor scales, with and without fast accumulation), the answer rows'
products in float32, TF32 and half precision with a float32 output, and the seed-shaped job's kernels per scheme
under the profiler (the job of `benchmarks/gpu_precision.py`).

    python -m benchmarks.gpu_profile [--schemes bf16 fp16-mixed fp8-static] [--skip products head profile]

Each product is timed, and checked for row invariance as the start-up check does (a row unchanged when the other
rows change, and the first m rows of M equal to the product of m rows for the launch sizes' m). Results: tables
on stdout, $OUT/gpu_profile.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.harness.timing import device_ms
from spinfc.backend import split_product

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--schemes", nargs="*", default=["bf16", "fp16-mixed", "fp8-static"])
ARGS.add_argument("--skip", nargs="*", default=[], choices=["products", "head", "profile"])
ARGS.add_argument("--rows", type=int, default=19200)
ARGS.add_argument("--answer-rows", type=int, default=672)
OPTIONS = ARGS.parse_args([])  # main() parses the command line
RESULTS: dict = {}
FP8 = torch.float8_e4m3fn


def save() -> None:
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_profile.json").write_text(json.dumps(RESULTS, indent=1, default=str))


def invariant(fn, x: torch.Tensor, sizes: list[int]) -> str:
    """"ok" when rows keep their values as the other rows change and as the row count drops to each size."""
    base = fn(x)
    M = x.shape[0]
    kept = torch.tensor([0, M // 2, M - 1], device=x.device)
    other = torch.randn_like(x.float()).to(x.dtype)
    other[kept] = x[kept]
    problems = [] if torch.equal(fn(other)[kept], base[kept]) else ["other rows"]
    problems += [f"M={m}" for m in sizes if m < M and not torch.equal(fn(x[:m].contiguous()), base[:m])]
    return "ok" if not problems else "FAILED " + ",".join(problems)


def products() -> None:
    """One layer's four products at `--rows` rows, in every way; TFLOP/s and row invariance."""
    T = OPTIONS.rows
    shapes = {"qkv": (4096, 6144), "o": (4096, 4096), "gate_up": (4096, 28672), "down": (14336, 4096)}
    sizes = [4864, 9600, 14464]
    table = RESULTS["products"] = {}
    for label, (K, N) in shapes.items():
        g = torch.Generator(device="cuda").manual_seed(K + N)
        x = torch.randn(T, K, generator=g, device="cuda")
        w = torch.randn(N, K, generator=g, device="cuda") * K**-0.5
        w_scale = w.abs().amax(dim=1).clamp(min=1e-12) / 448.0  # [N]
        x_scale = x.abs().amax() / 448.0
        x8 = (x / x_scale).clamp(-448, 448).to(FP8)
        w8 = (w / w_scale[:, None]).to(FP8)
        w8t = w8.t()
        one = torch.ones((), device="cuda")
        row_a = x_scale.expand(T, 1).contiguous()

        def rowwise(q, fast=False):
            a = row_a[: q.shape[0]]
            return torch._scaled_mm(q, w8t, scale_a=a, scale_b=w_scale[None, :], out_dtype=torch.bfloat16,
                                    use_fast_accum=fast)

        def tensorwise(q, fast=False, out=torch.bfloat16):
            return torch._scaled_mm(q, w8t, scale_a=x_scale, scale_b=one, out_dtype=out, use_fast_accum=fast)

        wb, wh = w.to(torch.bfloat16), w.to(torch.float16)
        xb, xh = x.to(torch.bfloat16), x.to(torch.float16)
        variants = {
            "bf16": (lambda q: F.linear(q, wb), xb),
            "fp16": (lambda q: F.linear(q, wh), xh),
            "fp8 rowwise": (rowwise, x8),
            "fp8 rowwise fast": (lambda q: rowwise(q, True), x8),
            "fp8 tensorwise": (tensorwise, x8),
            "fp8 tensorwise fast": (lambda q: tensorwise(q, True), x8),
            "fp8 tensorwise fp16 out": (lambda q: tensorwise(q, False, torch.float16), x8),
        }
        flops = 2 * T * K * N / 1e9
        for name, (fn, inp) in variants.items():
            try:
                t = device_ms(lambda: fn(inp))
                table[f"{label} {name}"] = {"ms": round(t, 3), "tflops": round(flops / t, 1),
                                            "rows": invariant(fn, inp, sizes)}
            except Exception as error:  # a variant this torch lacks
                table[f"{label} {name}"] = {"error": f"{type(error).__name__}: {str(error)[:120]}"}
            print(label, name, table[f"{label} {name}"], flush=True)
        del x, w, x8, w8, wb, wh, xb, xh
        torch.cuda.empty_cache()
    save()


def head() -> None:
    """The answer rows' products: the LM head [R, 4096] x [128256, 4096] and the last layer's three, in float32,
    TF32, and fp16/bf16 operands with a float32 output (one GEMM, and the activation split in two fp16 halves);
    time, row invariance, and the max |difference| to float64."""
    R = OPTIONS.answer_rows
    shapes = {"lm_head": (4096, 128256), "last_o": (4096, 4096), "last_gate_up": (4096, 28672),
              "last_down": (14336, 4096)}
    table = RESULTS["head"] = {}
    for label, (K, N) in shapes.items():
        g = torch.Generator(device="cuda").manual_seed(K * 3 + N)
        x = torch.randn(R, K, generator=g, device="cuda")
        w = (torch.randn(N, K, generator=g, device="cuda") * K**-0.5).to(torch.bfloat16).float()  # bf16 weights
        exact = (x.double() @ w.double().t())
        wh = w.to(torch.float16)

        def tf32(q):
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return q @ w.t()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False

        def half_out32(q):
            return torch.mm(q.to(torch.float16), wh.t(), out_dtype=torch.float32)

        def split_out32(q):
            hi = q.to(torch.float16)
            lo = (q - hi.float()).to(torch.float16)
            both = torch.mm(torch.cat([hi, lo]), wh.t(), out_dtype=torch.float32)
            return both[: q.shape[0]] + both[q.shape[0]:]

        variants = {"float32": lambda q: q @ w.t(), "tf32": tf32, "fp16 out fp32": half_out32,
                    "fp16 hi+lo out fp32": split_out32,
                    "split_product.split_mm (the model's)": lambda q: split_product.split_mm(q, wh)}
        flops = 2 * R * K * N / 1e9
        for name, fn in variants.items():
            try:
                t = device_ms(lambda: fn(x))
                error = float((fn(x).double() - exact).abs().max())
                table[f"{label} {name}"] = {"ms": round(t, 3), "tflops": round(flops / t, 1),
                                            "max_abs_error": f"{error:.2e}", "rows": invariant(fn, x, [128, 256])}
            except Exception as error:
                table[f"{label} {name}"] = {"error": f"{type(error).__name__}: {str(error)[:120]}"}
            print(label, name, table[f"{label} {name}"], flush=True)
        del x, w, wh, exact
        torch.cuda.empty_cache()
    save()


def profile() -> None:
    """Each scheme's job (two passes of 19,200 rows) run eagerly under the profiler: the kernels by GPU time."""
    from torch.profiler import ProfilerActivity, profile as profiler

    from benchmarks.quant_job import JobBench, run_job
    from benchmarks.quant_parts import build

    bench = JobBench("cuda", False)
    out = RESULTS["profile"] = {}
    for name in OPTIONS.schemes:
        began = time.perf_counter()
        model = build(bench.config, bench.state, name, "cuda", calibration=bench.calibration)
        with torch.inference_mode():
            run_job(model, bench.job, "cuda")
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run_job(model, bench.job, "cuda")
            torch.cuda.synchronize()
            eager = time.perf_counter() - t0
            with profiler(activities=[ProfilerActivity.CUDA]) as prof:
                run_job(model, bench.job, "cuda")
                torch.cuda.synchronize()
        rows = []
        for event in prof.key_averages():
            t = getattr(event, "self_device_time_total", None)
            t = t if t is not None else getattr(event, "self_cuda_time_total", 0)
            if t > 0:
                rows.append((t / 1000, event.count, event.key))
        rows.sort(reverse=True)
        total = sum(r[0] for r in rows)
        out[name] = {"eager_seconds": round(eager, 3), "kernel_ms_total": round(total, 1),
                     "kernels": [(round(t, 2), n, k[:90]) for t, n, k in rows[:16]]}
        print(f"\n== {name}: eager {eager:.3f} s, kernels {total:.1f} ms (built in {t0 - began:.0f} s)")
        for t, n, k in rows[:16]:
            print(f"{t:8.2f} ms {t / total:6.1%} x{n:<5} {k[:100]}")
        del model, prof
        torch.cuda.empty_cache()
        save()


def main(argv: list[str] | None = None) -> None:
    global OPTIONS
    OPTIONS = ARGS.parse_args(argv)
    RESULTS["environment"] = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    for section, fn in (("products", products), ("head", head), ("profile", profile)):
        if section in OPTIONS.skip:
            continue
        began = time.perf_counter()
        try:
            fn()
        except Exception as error:
            import traceback

            traceback.print_exc()
            RESULTS.setdefault("errors", {})[section] = f"{type(error).__name__}: {error}"
        print(f"-- {section}: {time.perf_counter() - began:.0f} s", flush=True)
    print("\n| product | ms | TFLOP/s | rows |")
    for label, row in {**RESULTS.get("products", {}), **RESULTS.get("head", {})}.items():
        print(f"| {label} | {row.get('ms', '-')} | {row.get('tflops', row.get('error'))} | {row.get('rows', '-')} "
              f"{row.get('max_abs_error', '')} |")
    save()


if __name__ == "__main__":
    main()
