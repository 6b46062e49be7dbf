"""Where the packed Triton path's time goes at Llama-3-8B shape, and which choices move it (one H200):

    python -m benchmarks.gpu_tune     # from the repository root; about 2 minutes

  1. each of a layer's matmuls at the pass's row count (and a few others), cuBLAS against cuBLASLt, separate
     projections against fused ones; each checked for row invariance (a row's output bit-identical when the rows
     are shifted by a multiple of 64 and when the other rows change);
  2. one layer's matmuls back to back for 32 layers (a CUDA graph): the sustained rate, which sets the job's time;
  3. tree attention tile/warp/stage variants (checked against the reference), the block list alone;
     add_rms_norm warp counts; rope on q and k in one launch against two;
  4. the whole seed-shaped job under model variants (fused projections, last layer on the answer rows only,
     cuBLASLt, the best attention and norm settings), each checked for batch invariance (torch.equal, the job
     in reverse content order and content c0 alone).
Prints a table per part; writes $OUT/gpu_tune.json when $OUT is set.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

from benchmarks.gpu_checks import rel_error
from benchmarks.harness.stacks import LLAMA3_8B, random_state_dict
from benchmarks.harness.launches import compile_job, make_program, seed_job
from spinfc.backend import reference, triton_ops
from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.graphs import GraphedModel
from spinfc.backend.kernels import rms_norm as rms_kernel, tree_attention as attention_kernel
from spinfc.runtime.models import build_model

C = LLAMA3_8B
T = 19200
RESULTS: dict = {}
BF16 = torch.bfloat16
STARTED = time.perf_counter()


def log(*args) -> None:
    print(f"[{time.perf_counter() - STARTED:6.1f} s]", *args, flush=True)


def save() -> None:
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_tune.json").write_text(json.dumps(RESULTS, indent=1, default=str))


def ms(fn) -> float:
    """Median milliseconds of fn() (triton's do_bench: events, L2 flushed between calls)."""
    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")


def randn(*shape) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=BF16)


# ---- 1. matmuls ----------------------------------------------------------------------------------------------

PRODUCTS = {  # name: (N, K) of F.linear(x [M, K], w [N, K])
    "q": (C.heads * C.head_dim, C.hidden), "k": (C.kv_heads * C.head_dim, C.hidden),
    "qkv": ((C.heads + 2 * C.kv_heads) * C.head_dim, C.hidden), "o": (C.hidden, C.heads * C.head_dim),
    "gate": (C.intermediate, C.hidden), "gate_up": (2 * C.intermediate, C.hidden), "down": (C.hidden, C.intermediate),
}
LAYER = {"separate": ["q", "k", "k", "o", "gate", "gate", "down"], "fused": ["qkv", "o", "gate_up", "down"]}


def invariant_rows(x: torch.Tensor, w: torch.Tensor) -> bool:
    out = F.linear(x, w)
    shifted = F.linear(torch.roll(x, 64 * 7, 0), w)
    other = x.clone()
    other[1600:] = randn(x.shape[0] - 1600, x.shape[1])
    return torch.equal(torch.roll(out, 64 * 7, 0), shifted) and torch.equal(F.linear(other, w)[:1600], out[:1600])


def matmuls() -> None:
    table = {}
    for lib in ("cublas", "cublaslt"):
        torch.backends.cuda.preferred_blas_library(lib)
        for M in (T, 672, 19456, 38400):
            names = list(PRODUCTS) if M in (T, 38400) else ["qkv", "o", "gate_up", "down"]
            for name in names:
                N, K = PRODUCTS[name]
                x, w = randn(M, K), randn(N, K)
                t = ms(lambda: F.linear(x, w))
                row = {"ms": round(t, 4), "tflops": round(2 * M * N * K / t / 1e9, 1)}
                if M == T:
                    row["invariant"] = invariant_rows(x, w)
                table[f"{lib} M={M} {name}"] = row
                del x, w
        torch.cuda.empty_cache()
    torch.backends.cuda.preferred_blas_library("default")
    RESULTS["matmuls"] = table
    for key, row in table.items():
        print(f"  {key:28s} {row['ms']:8.3f} ms {row['tflops']:7.1f} TFLOP/s {row.get('invariant', '')}")


def sustained() -> None:
    """32 layers' matmuls in one CUDA graph (4 weight sets in turn), replayed 3 times: the rate a job sustains."""
    table = {}
    x, m = randn(T, C.hidden), randn(T, C.intermediate)
    for lib in ("cublas", "cublaslt"):
        torch.backends.cuda.preferred_blas_library(lib)
        for layout, names in LAYER.items():
            weights = [{n: randn(*PRODUCTS[n]) for n in set(names)} for _ in range(4)]

            def run():
                for layer in range(32):
                    w = weights[layer % 4]
                    for n in names:
                        F.linear(m if n == "down" else x, w[n])

            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up on a side stream before capture, as backend.graphs does
                run()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run()
            times = []
            for _ in range(3):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                stop.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(stop))
            flops = 32 * sum(2 * T * PRODUCTS[n][0] * PRODUCTS[n][1] for n in names)
            t = statistics.median(times)
            table[f"{lib} {layout}"] = {"ms_per_layer": round(t / 32, 3), "tflops": round(flops / t / 1e9, 1)}
            del graph, weights
            torch.cuda.empty_cache()
    torch.backends.cuda.preferred_blas_library("default")
    RESULTS["sustained"] = table
    for key, row in table.items():
        print(f"  {key:20s} {row['ms_per_layer']:7.3f} ms/layer {row['tflops']:7.1f} TFLOP/s")


# ---- 3. attention and element-wise ops -----------------------------------------------------------------------

ATTENTION = {  # run 1: around attempt 1's (128, 64, 8, 3); run 2: around the winner, (64, 32, 4, 3)
    "wide": [(128, 64, 8, 3), (128, 64, 8, 2), (128, 64, 8, 4), (128, 64, 4, 3), (128, 64, 4, 2), (64, 64, 4, 3),
             (64, 64, 4, 4), (64, 64, 8, 3), (128, 32, 4, 3), (128, 32, 8, 3), (64, 32, 4, 3)],
    "near": [(64, 32, 4, 3), (64, 32, 4, 2), (64, 32, 4, 4), (64, 32, 2, 3), (64, 16, 4, 3), (64, 16, 2, 3),
             (32, 32, 2, 3), (32, 32, 4, 3), (64, 64, 4, 3)],
    # a program per key/value head, all its query heads in one tile (the 5th field: pack_heads)
    "pack": [(64, 32, 4, 3), (64, 32, 4, 2), (32, 32, 4, 3, True), (32, 32, 8, 3, True), (32, 32, 4, 2, True),
             (32, 32, 8, 2, True), (16, 32, 4, 3, True), (16, 32, 4, 2, True), (64, 32, 8, 3, True),
             (32, 16, 4, 3, True), (32, 64, 8, 3, True)],
}


def attention(job, variants: str) -> tuple[int, ...]:
    launch = job.launches[0].to("cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    q32 = torch.randn(T, C.heads, C.head_dim, device="cuda", generator=g)
    k32, v32 = (torch.randn(T, C.kv_heads, C.head_dim, device="cuda", generator=g) for _ in range(2))
    want = reference.tree_attention(q32, k32, v32, launch.ends, launch.positions, launch.spans,
                                    scale=C.attention_scale, window=None)
    q, k, v = q32.to(BF16), k32.to(BF16), v32.to(BF16)
    args = (q, k, v, launch.ends, launch.positions, launch.spans)
    table = {}
    for blocks in ATTENTION[variants]:
        try:
            got = attention_kernel.tree_attention(*args, scale=C.attention_scale, window=None, blocks=blocks)
            error = rel_error(got, want)
            t = ms(lambda: attention_kernel.tree_attention(*args, scale=C.attention_scale, window=None,
                                                           blocks=blocks))
            table[str(blocks)] = {"ms": round(t, 4), "rel_error": error}
        except Exception as failure:  # a variant that does not compile is reported, not fatal
            table[str(blocks)] = {"ms": float("inf"), "error": f"{type(failure).__name__}: {failure}"[:200]}
    for name, build in (("block list (kernel)", attention_kernel.visible_key_blocks),
                        ("block list (sort, attempt 1)", attention_kernel.visible_key_blocks_reference)):
        table[f"{name} 64x32"] = {"ms": round(ms(lambda: build(launch.ends, launch.positions, None, 64, 32)), 4)}
    # rope: q and k in one launch (adjacent heads of a fused qkv output) against two launches
    qkv = randn(T, C.heads + 2 * C.kv_heads, C.head_dim)
    table["rope q,k separately"] = {"ms": round(ms(lambda: (
        triton_ops.apply_rope(qkv[:, :C.heads], launch.positions, C.rope_theta),
        triton_ops.apply_rope(qkv[:, C.heads:C.heads + C.kv_heads], launch.positions, C.rope_theta))), 4)}
    table["rope q,k one launch"] = {"ms": round(ms(lambda: triton_ops.apply_rope(
        qkv[:, :C.heads + C.kv_heads], launch.positions, C.rope_theta)), 4)}
    x, r, w = randn(T, C.hidden), randn(T, C.hidden), randn(C.hidden)
    for warps in (2, 4, 8, 16):
        rms_kernel.NUM_WARPS = warps
        table[f"add_rms_norm warps={warps}"] = {"ms": round(ms(lambda: triton_ops.add_rms_norm(x, r, w, 1e-5, False)),
                                                            4)}
    rms_kernel.NUM_WARPS = None
    gate_up = randn(T, 2 * C.intermediate)
    from spinfc.backend.kernels import gated_act as act_kernel
    from spinfc.backend.kernels.quantize_reference import ActivationQuant

    fp8 = ActivationQuant(torch.tensor(10.0, device="cuda"), torch.float8_e4m3fn, -448.0, 448.0)
    chosen = act_kernel.BLOCK_F, act_kernel.NUM_WARPS
    for block, warps in ((1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8), (512, 4)):
        act_kernel.BLOCK_F, act_kernel.NUM_WARPS = block, warps
        for label, quant in (("", None), (" fp8 out", fp8)):
            table[f"gated_act {block}/{warps}{label}"] = {"ms": round(ms(lambda: triton_ops.gated_act(
                gate_up[:, :C.intermediate], gate_up[:, C.intermediate:], "silu", quant)), 4)}
    act_kernel.BLOCK_F, act_kernel.NUM_WARPS = chosen
    RESULTS["ops"] = table
    for key, row in table.items():
        print(f"  {key:28s} {row['ms']:8.4f} ms  {row.get('rel_error', row.get('error', ''))}")
    ok = {k: row for k, row in table.items() if k.startswith("(") and row.get("rel_error", 1) < 1e-2}
    best = min(ok, key=lambda key: ok[key]["ms"])
    warps = min((2, 4, 8, 16), key=lambda n: table[f"add_rms_norm warps={n}"]["ms"])
    RESULTS["best"] = {"attention": best, "rms_warps": warps}
    import ast

    return ast.literal_eval(best), warps


def residual_micro() -> None:
    """An output projection and the norm after it, 32 times in a graph: the add in the norm (F.linear, then
    add_rms_norm of two tensors) against the add in the matmul (residual.addmm_, then rms_norm of one)."""
    table = {}
    w_norm = randn(C.hidden)
    for name, K in (("o", C.heads * C.head_dim), ("down", C.intermediate)):
        a, weight, residual = randn(T, K), randn(C.hidden, K), randn(T, C.hidden)
        ways = {
            "add in norm": lambda: triton_ops.add_rms_norm(F.linear(a, weight), residual, w_norm, 1e-5, False),
            "add in matmul": lambda: triton_ops.rms_norm(residual.addmm_(a, weight.t()), w_norm, 1e-5, False),
        }
        for way, step in ways.items():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(32):
                    step()
            times = []
            for _ in range(5):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                stop.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(stop) / 32)
            table[f"{name}: {way}"] = {"ms": round(statistics.median(times), 4)}
            del graph
        del a, weight, residual
        torch.cuda.empty_cache()
    RESULTS["residual"] = table
    for key, row in table.items():
        print(f"  {key:28s} {row['ms']:8.4f} ms per projection and norm")


def ab_job(state) -> None:
    """The job with the residual adds in the norms (the default) and in the matmuls, both built and captured,
    timed alternately (A B A B A B, so drift in the card's clocks falls on both), each checked for invariance."""
    job, reversed_job, alone = jobs_of(20480)
    run = lambda model, j: j.scores([model.forward(l.to("cuda")) for l in j.launches])  # noqa: E731
    models = {}
    for name, in_matmul in (("add in norm", False), ("add in matmul", True)):
        graphed = GraphedModel(build_model(C, state, ops=triton_ops, weights_hash="random", fuse=True,
                                           residual_in_matmul=in_matmul), [job.shape])
        graphed.warm_up()
        models[name] = graphed
    times = {name: [] for name in models}
    for _ in range(3):
        for name, graphed in models.items():
            torch.cuda.synchronize()
            began = time.perf_counter()
            run(graphed, job)
            torch.cuda.synchronize()
            times[name].append(time.perf_counter() - began)
    table = {}
    for name, graphed in models.items():
        scores = run(graphed, job)
        reordered, by_itself = run(graphed, reversed_job), run(graphed, alone)
        seconds = statistics.median(times[name])
        table[name] = {"seconds": round(seconds, 4), "questions_per_s": round(1344 / seconds, 1),
                       "all": [round(t, 4) for t in times[name]],
                       "invariant_reversed": all(torch.equal(scores[k], reordered[k]) for k in scores),
                       "invariant_alone": all(torch.equal(scores[k], by_itself[k]) for k in by_itself)}
        table[name]["scores"] = scores
    gap = max(abs(float(table["add in norm"]["scores"][k] - table["add in matmul"]["scores"][k]))
              for k in table["add in norm"]["scores"])
    for row in table.values():
        del row["scores"]
    RESULTS["ab_job"] = {"variants": table, "max_gap": gap}
    print("\n| residual add | seconds | questions/s | all | invariant (reversed, alone) |")
    print("| --- | ---: | ---: | --- | --- |")
    for name, row in table.items():
        print(f"| {name} | {row['seconds']:.3f} | {row['questions_per_s']:,.0f} | {row['all']} | "
              f"{row['invariant_reversed']}, {row['invariant_alone']} |")
    print(f"max |logprob gap| between them: {gap:.3g}")


# ---- 4. the whole job ----------------------------------------------------------------------------------------


def untrimmed(model):
    """The forward of attempt 1 (every layer on every row), as an instance attribute over `Model.forward`."""

    @torch.inference_mode()
    def forward(launch):
        context = ForwardContext(launch)
        x, residual = model.inputs(context), None
        for index in range(model.config.layers):
            x, residual = model.layer(index, x, residual, context)
        final, _ = model.ops.add_rms_norm(x[launch.rows], residual[launch.rows], model.final_norm,
                                          model.config.norm_eps, model.NORM_UNIT_OFFSET)
        return model.ops.answer_logprobs(final, model.lm_head, launch.read_row, launch.read_token)

    return forward


def jobs_of(max_budget: int):
    """(job, the job in reverse content order, content c0 alone), all of one launch shape."""
    spec = dict(contents=24, content_tokens=470, questions=56, question_tokens=20, max_budget=max_budget)
    job = seed_job(C.vocab, **spec)
    program = job.program
    alone = compile_job(make_program([program.contents[0]], list(program.questions), program.plan.budget,
                                     program.plan.block), rows=job.shape[1], reads=job.shape[2])
    return job, seed_job(C.vocab, reverse=True, **spec), alone


def variant(state, jobs, *, fuse: bool, trim: bool, lib: str = "default", blocks=None, warps=None) -> tuple:
    """Time the job (median of 3) under one set of choices; check invariance. Returns (row, scores)."""
    job, reversed_job, alone = jobs
    default_blocks, default_packed = dict(attention_kernel.BLOCKS), dict(attention_kernel.PACKED_BLOCKS)
    torch.backends.cuda.preferred_blas_library(lib)
    if blocks:  # what blocks_for picks for head dim 128: packed (a 5th field True) or one query head a program
        attention_kernel.PACKED_BLOCKS.pop("d128", None)
        if len(blocks) > 4 and blocks[4]:
            attention_kernel.PACKED_BLOCKS["d128"] = tuple(blocks[:4])
        else:
            attention_kernel.BLOCKS["d128"] = tuple(blocks[:4])
    rms_kernel.NUM_WARPS = warps
    run = lambda model, j: j.scores([model.forward(l.to("cuda")) for l in j.launches])  # noqa: E731
    try:
        model = build_model(C, state, ops=triton_ops, weights_hash="random", fuse=fuse, residual_in_matmul=False)
        if not trim:
            model.forward = untrimmed(model)
        graphed = GraphedModel(model, [job.shape])
        graphed.warm_up()
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            began = time.perf_counter()
            outputs = [graphed.forward(l.to("cuda")) for l in job.launches]
            torch.cuda.synchronize()
            times.append(time.perf_counter() - began)
        scores = job.scores(outputs)
        reordered, by_itself = run(graphed, reversed_job), run(graphed, alone)
        seconds = statistics.median(times)
        row = {
            "seconds": round(seconds, 4), "questions_per_s": round(1344 / seconds, 1), "shape": job.shape,
            "passes": len(job.launches),
            "invariant_reversed": all(torch.equal(scores[k], reordered[k]) for k in scores),
            "invariant_alone": all(torch.equal(scores[k], by_itself[k]) for k in by_itself),
            "all": [round(t, 4) for t in times],
        }
        del graphed, model
        return row, scores
    finally:
        attention_kernel.BLOCKS.clear()
        attention_kernel.BLOCKS.update(default_blocks)
        attention_kernel.PACKED_BLOCKS.clear()
        attention_kernel.PACKED_BLOCKS.update(default_packed)
        rms_kernel.NUM_WARPS = None
        torch.backends.cuda.preferred_blas_library("default")
        gc.collect()
        torch.cuda.empty_cache()


def whole_job(state, attention_blocks, rms_warps) -> None:
    two = jobs_of(20480)
    tuned = dict(blocks=attention_blocks, warps=rms_warps)
    variants = [
        ("attempt 1 (separate, all rows)", two, dict(fuse=False, trim=False)),
        ("fused", two, dict(fuse=True, trim=False)),
        ("fused + last layer on answer rows", two, dict(fuse=True, trim=True)),
        ("fused + trim + cuBLASLt", two, dict(fuse=True, trim=True, lib="cublaslt")),
        ("fused + trim + attention/norm tuned", two, dict(fuse=True, trim=True, **tuned)),
        ("fused + trim + cuBLASLt + tuned", two, dict(fuse=True, trim=True, lib="cublaslt", **tuned)),
    ]
    table, base = {}, None

    def record(name, jobs, choices):
        nonlocal base
        try:
            row, scores = variant(state, jobs, **choices)
        except Exception as failure:
            table[name] = {"seconds": float("nan"), "error": f"{type(failure).__name__}: {failure}"[:300]}
            log(name, table[name])
            return
        base = base or scores
        common = [k for k in scores if k in base]
        row["max_gap_to_attempt_1"] = max(abs(float(scores[k] - base[k])) for k in common)
        row["choices"] = {k: v for k, v in choices.items()}
        table[name] = row
        log(name, row)
        RESULTS["job"] = table
        save()

    for name, jobs, choices in variants:
        record(name, jobs, choices)
    del two
    lt = table["fused + trim + cuBLASLt + tuned"].get("seconds", 9) < table["fused + trim + attention/norm tuned"].get(
        "seconds", 9)
    record("best, one pass of 38,400 rows", jobs_of(40960),
           dict(fuse=True, trim=True, lib="cublaslt" if lt else "default", **tuned))
    print("\n| variant | seconds | questions/s | invariant (reversed, alone) | max gap to attempt 1 |")
    print("| --- | ---: | ---: | --- | ---: |")
    for name, row in table.items():
        if "error" in row:
            print(f"| {name} | failed: {row['error'][:80]} | | | |")
            continue
        print(f"| {name} | {row['seconds']:.3f} | {row['questions_per_s']:,.0f} | {row['invariant_reversed']}, "
              f"{row['invariant_alone']} | {row['max_gap_to_attempt_1']:.3g} |")


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="ops,matmuls,sustained,job",
                        help="comma-separated: ops, matmuls, sustained, job (run 1); residual, ab (run 2)")
    parser.add_argument("--attention", default="wide", choices=sorted(ATTENTION), help="attention variants to time")
    options = parser.parse_args(argv)
    parts = options.parts.split(",")
    RESULTS["environment"] = {"torch": torch.__version__, "triton": triton.__version__,
                              "device": torch.cuda.get_device_name(), "parts": parts}
    log(RESULTS["environment"])
    job = seed_job(C.vocab, contents=24, content_tokens=470, questions=56, question_tokens=20)
    assert job.shape[0] == T, job.shape
    blocks, warps = None, None
    steps = [("ops", "3. attention and element-wise ops", lambda: attention(job, options.attention)),
             ("matmuls", "1. matmuls at fixed shapes", matmuls),
             ("sustained", "2. sustained: 32 layers of matmuls in a graph", sustained),
             ("residual", "residual add in the norm or in the matmul", residual_micro)]
    for part, title, step in steps:
        if part in parts:
            log("==", title)
            found = step()
            if part == "ops":
                blocks, warps = found
            save()
    if "job" in parts or "ab" in parts:
        log("== 4. the whole job")
        state = {key: value.to(BF16) for key, value in random_state_dict(C, "cuda", 0).items()}
        torch.cuda.empty_cache()
        if "job" in parts:
            whole_job(state, blocks, warps)
        if "ab" in parts:
            ab_job(state)
        save()
    log("done")


if __name__ == "__main__":
    main()
