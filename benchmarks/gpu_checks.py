"""The correctness half of `benchmarks/gpu.py`, on the GPU: each Triton op against the PyTorch reference at real
shapes, whole random-weight models (bf16 Triton against the float32 reference), and batch invariance."""

from __future__ import annotations

import random

import torch

from benchmarks.harness.stacks import SMALL_CONFIGS, random_state_dict
from benchmarks.harness.launches import Job, compile_job, make_program, random_tokens, small_job
from spinfc.backend import reference, triton_ops
from spinfc.backend.graphs import GraphedModel
from spinfc.backend.launch import lower
from spinfc.ir.nodes import Content, Option, OptionSlot, Question
from spinfc.runtime.models import build_model

BF16 = torch.bfloat16


def prepare(model, shapes, device: str):
    """The model as the benchmark runs it: replayed from CUDA graphs on a GPU; as is on the CPU (--smoke)."""
    if not str(device).startswith("cuda"):
        return model
    graphed = GraphedModel(model, shapes)
    graphed.warm_up()
    return graphed


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in float64; NaN anywhere gives inf."""
    got, want = got.double(), want.double()
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - want).norm() / want.norm())


def kernel_parity(device: str, dtype: torch.dtype = BF16, small: bool = False, seed: int = 0) -> dict[str, float]:
    """Relative error of each op in `dtype` (Triton) against the reference on the same inputs in float32, at
    Llama-3-8B's sizes (`small`: tiny sizes, for --smoke)."""
    g = torch.Generator(device=device).manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, generator=g, device=device)  # noqa: E731
    T, D, F, H, V = (64, 96, 80, 4, 500) if small else (2048, 4096, 14336, 32, 128256)
    errors = {}
    x, r, w = randn(T, D), randn(T, D), randn(D) * 0.1 + 1
    errors["rms_norm"] = rel_error(triton_ops.rms_norm(x.to(dtype), w.to(dtype), 1e-5, False),
                                   reference.rms_norm(x, w, 1e-5, False))
    normed, summed = triton_ops.add_rms_norm(x.to(dtype), r.to(dtype), w.to(dtype), 1e-6, True)
    want_normed, want_summed = reference.add_rms_norm(x, r, w, 1e-6, True)
    errors["add_rms_norm"] = max(rel_error(normed, want_normed), rel_error(summed, want_summed))
    fused = randn(T, 2 * F)
    for kind in ("silu", "gelu_tanh"):
        half = fused.to(dtype)
        errors[f"gated_act_{kind}"] = rel_error(triton_ops.gated_act(half[:, :F], half[:, F:], kind),
                                                reference.gated_act(fused[:, :F], fused[:, F:], kind))
    q = randn(T, H, 128)
    positions = torch.randint(0, 4000, (T,), generator=g, device=device)
    want = reference.apply_rope(q, positions, 500000.0)  # first: the Triton op rotates its input in place
    errors["apply_rope"] = rel_error(triton_ops.apply_rope(q.to(dtype).clone(), positions, 500000.0), want)
    hidden, lm_head = randn(64, D), randn(V, D) * 0.02
    read_row, read_token = torch.arange(64, device=device).repeat(2), torch.randint(0, V, (128,), device=device)
    got = triton_ops.answer_logprobs(hidden.to(dtype), lm_head.to(dtype), read_row, read_token)
    want = reference.answer_logprobs(hidden.to(dtype).float(), lm_head.to(dtype).float(), read_row, read_token)
    errors["answer_logprobs"] = rel_error(got, want)
    # Tree attention on a packed layout of real trees: Llama's head dim, Qwen's (64), Gemma's (256, window).
    rows, tokens = (256, (10, 60)) if small else (4096, (50, 500))
    job = small_job(1000, contents=12, budget=rows, block=64, seed=seed, content_tokens=tokens, questions=4)
    launch = job.launches[0].to(device)
    shapes = ((4, 2, 32, None), (2, 1, 64, 9)) if small else ((32, 8, 128, None), (16, 8, 64, None), (4, 1, 256, 48))
    for heads, kv_heads, dim, window in shapes:
        q, k, v = randn(rows, heads, dim), randn(rows, kv_heads, dim), randn(rows, kv_heads, dim)
        got = triton_ops.tree_attention(q.to(dtype), k.to(dtype), v.to(dtype), launch.ends, launch.positions,
                                        launch.spans, scale=dim**-0.5, window=window)
        want = reference.tree_attention(q, k, v, launch.ends, launch.positions, launch.spans, scale=dim**-0.5,
                                        window=window)
        errors[f"tree_attention_d{dim}" + (f"_w{window}" if window else "")] = rel_error(got, want)
    return errors


def scores_of(model, job: Job, device: str) -> dict:
    return job.scores([model.forward(launch.to(device)) for launch in job.launches])


def model_parity(device: str, dtype: torch.dtype = BF16, seed: int = 0, small: bool = False) -> dict[str, dict]:
    """Per family (small random-weight models): the largest and mean |logprob| gap of the bf16 Triton path
    (captured in a CUDA graph) to the float32 reference on the same bf16 weights, and, for scale, the gap of the
    bf16 reference itself."""
    results = {}
    for family, config in SMALL_CONFIGS.items():
        state = {k: v.to(dtype) for k, v in random_state_dict(config, device, seed).items()}
        build = lambda ops, dtype: build_model(config, state, ops=ops, dtype=dtype, device=device,  # noqa: E731
                                               weights_hash=f"random-{family}")
        job = small_job(config.vocab, contents=3, budget=512, block=64, seed=seed + 1, content_tokens=(20, 80)) \
            if small else small_job(config.vocab, contents=8, budget=2048, block=64, seed=seed + 1)
        want = scores_of(build(reference, torch.float32), job, device)
        noise = scores_of(build(reference, dtype), job, device)
        got = scores_of(prepare(build(triton_ops, dtype), [job.shape], device), job, device)
        gap = torch.tensor([abs(float(got[k] - want[k])) for k in want])
        ref_gap = torch.tensor([abs(float(noise[k] - want[k])) for k in want])
        results[family] = {"reads": len(want), "max_abs": float(gap.max()), "mean_abs": float(gap.mean()),
                           "bf16_reference_max_abs": float(ref_gap.max()), "finite": bool(torch.isfinite(gap).all())}
    return results


def _contents(rng: random.Random, n: int, prefix: str, vocab: int) -> list[Content]:
    return [Content(f"{prefix}{i}", "", tokens=random_tokens(rng, rng.randint(30, 80), vocab)) for i in range(n)]


def relower(job: Job, rows: int, reads: int) -> Job:
    """The same layouts lowered with answer rows and reads padded to `rows`/`reads` (one launch shape)."""
    launches = [lower(l, rows_padded_to=rows, reads_padded_to=reads) for l in job.program.layouts]
    return Job(job.program, launches, job.reads)


def invariance(device: str, dtype: torch.dtype = BF16, seed: int = 0, others: int = 200,
               config=SMALL_CONFIGS["llama"]) -> dict[str, object]:
    """Three target contents scored (1) alone in a pass, (2) packed with half the others (100) at other offsets,
    and (3) in a two-pass job with all the others (200) whose passes run in reverse order: every read
    bit-identical (torch.equal). Triton path, one launch shape, replayed from a CUDA graph on a GPU."""
    rng = random.Random(seed)
    targets, others = _contents(rng, 3, "target", config.vocab), _contents(rng, others, "other", config.vocab)
    half, three_quarters = len(others) // 4, 3 * len(others) // 4
    questions = []
    for j in range(4):
        first = rng.randrange(1, config.vocab)
        options = (Option("a", (first,)), Option("b", (first, rng.randrange(1, config.vocab))))
        prompt = random_tokens(rng, rng.randint(3, 6), config.vocab)
        questions.append(Question(f"q{j}", (), "", OptionSlot(options), prompt))
    budget, block = 128 * (len(others) // 2 + 8), 64  # 100 others (and the targets) fit one pass, 200 need two
    jobs = {
        "alone": compile_job(make_program(targets, questions, budget, block)),
        "packed_with_others": compile_job(
            make_program(others[:half] + targets + others[half : 2 * half], questions, budget, block)),
        "two_passes_reversed": compile_job(
            make_program(others[:three_quarters] + targets + others[three_quarters:], questions, budget, block)),
    }
    rows = max(job.shape[1] for job in jobs.values())
    reads = max(job.shape[2] for job in jobs.values())
    jobs = {name: relower(job, rows, reads) for name, job in jobs.items()}
    state = {k: v.to(dtype) for k, v in random_state_dict(config, device, seed).items()}
    model = prepare(build_model(config, state, ops=triton_ops, dtype=dtype, device=device,
                                weights_hash="random-llama"), [(budget, rows, reads)], device)
    scores = {}
    for name, job in jobs.items():
        order = list(range(len(job.launches)))[:: -1 if name == "two_passes_reversed" else 1]
        outputs = {i: model.forward(job.launches[i].to(device)) for i in order}
        scores[name] = job.scores([outputs[i] for i in range(len(job.launches))])
    keys = sorted(k for k in scores["alone"] if k[0].startswith("target"))
    offsets = {name: sorted(p.start for l in job.program.plan.passes for p in l.placements
                            if job.program.contents[p.content].id.startswith("target"))
               for name, job in jobs.items()}
    result: dict[str, object] = {"reads_compared": len(keys), "target_offsets": offsets,
                                 "passes": {name: len(job.launches) for name, job in jobs.items()}}
    for name in ("packed_with_others", "two_passes_reversed"):
        result[name] = all(torch.equal(scores["alone"][k], scores[name][k]) for k in keys)
    return result


def attention_invariance(device: str, dtype: torch.dtype = BF16, seed: int = 0) -> dict[str, object]:
    """The tree-attention kernel's promise, where it is made (on CUDA, in `dtype`): every content of a packed layout
    of real trees (contents at multiples of `ALIGNMENT`, the launcher's own blocks), moved alone to another aligned
    offset of an otherwise padded layout, gives bit-identical rows. Also reported, not promised: the same with query
    blocks of 2 x ALIGNMENT rows, which straddle two contents (`straddling_identical`)."""
    from spinfc.backend.kernels import tree_attention as kernel

    align, rows = kernel.ALIGNMENT, 4096
    job = small_job(1000, contents=16, budget=rows, block=align, seed=seed, content_tokens=(40, 300), questions=4)
    launch = job.launches[0].to(device)
    g = torch.Generator(device=device).manual_seed(seed)
    results: dict[str, object] = {"contents": len(launch.spans)}
    for name, blocks, heads, kv_heads, dim, window in (
        ("d128", None, 32, 8, 128, None), ("d256_window", None, 4, 1, 256, 48),
        ("straddling_d128", (2 * align, 32, 4), 32, 8, 128, None),
    ):
        q, k, v = (torch.randn(rows, h, dim, generator=g, device=device).to(dtype) for h in (heads, kv_heads, kv_heads))
        packed = kernel.tree_attention(q, k, v, launch.ends, launch.positions, scale=dim**-0.5, window=window,
                                       blocks=blocks)
        same = True
        for a, b in launch.spans:
            start = rows - align * -(-(b - a) // align) if a == 0 else 0  # somewhere else, still aligned
            ends = torch.arange(1, rows + 1, dtype=torch.int32, device=device)
            positions = torch.zeros(rows, dtype=launch.positions.dtype, device=device)
            ends[start:start + b - a] = launch.ends[a:b] - a + start
            positions[start:start + b - a] = launch.positions[a:b]
            moved = [torch.randn(rows, *t.shape[1:], generator=g, device=device).to(dtype) for t in (q, k, v)]
            for t, m in zip((q, k, v), moved):
                m[start:start + b - a] = t[a:b]
            alone = kernel.tree_attention(*moved, ends, positions, scale=dim**-0.5, window=window, blocks=blocks)
            same &= torch.equal(alone[start:start + b - a], packed[a:b])
        results[name + "_identical"] = bool(same)
    results["ok"] = results["d128_identical"] and results["d256_window_identical"]
    return results
