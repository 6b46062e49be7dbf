"""Qwen3.5 on one GPU, in one run: the gated delta rule on flash-linear-attention against its PyTorch reference, the
stack against transformers (small random model, float32), batch invariance at the Qwen3.5-27B shape (random bf16
weights), and the seed-shaped job's speed: in-process (pre-lowered passes, and the engine) and over HTTP (`spinfc
serve` in a child process, the model made there by this script's loader: harness/serve_app.py), the fraction of the
floor, the state memory per content, and the re-reading baseline (every question as its own sequence, content +
question, through the same stack: what a server without branching off a state computes). Exits non-zero on a failed
check.

    python -m benchmarks.gpu_qwen3_5 --tokenizer DIR [--layers 64] [--out results.json]
    python -m benchmarks.gpu_qwen3_5 --tokenizer DIR --small      # checks the script on the CPU

`--layers N` keeps the 27B's widths with fewer layers (3 linear : 1 full kept); times then scale by 64 / N.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

import attrs
import torch

from benchmarks.harness import clients, jobs, models, serving, timing
from benchmarks.harness.stacks import QWEN3_5_27B, qwen3_5_params, qwen3_5_state
from spinfc.runtime.models.qwen3_5 import LinearAttention, Qwen3_5Config

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--layers", type=int, default=64)
ARGS.add_argument("--budget", type=int, default=19200)
ARGS.add_argument("--skip-http", action="store_true")
ARGS.add_argument("--out", type=Path, default=None)
ARGS.add_argument("--small", action="store_true", help="a tiny model and job on the CPU (checks the script)")

DEVICE = "cuda:0"
SEED = dict(contents=24, content_tokens=470, questions=56, question_tokens=20)
SMALL_SEED = dict(contents=4, content_tokens=40, questions=4, question_tokens=5)
JOB = dict(SEED)  # the job's shape (main sets it)


def job_questions() -> int:
    return JOB["contents"] * JOB["questions"]


def job_tokens() -> int:
    return JOB["contents"] * JOB["content_tokens"] + job_questions() * JOB["question_tokens"]


def tiny(vocab: int) -> Qwen3_5Config:
    return attrs.evolve(QWEN3_5_27B, hidden=64, layers=4, heads=4, kv_heads=1, head_dim=32, intermediate=128,
                        vocab=vocab, rotary_dim=8,
                        linear=LinearAttention(layers=(True, True, True, False), key_heads=2, value_heads=4,
                                               key_dim=16, value_dim=16, conv_kernel=4))


def on_cuda() -> bool:
    return DEVICE.startswith("cuda")


def shape(layers: int, vocab: int) -> Qwen3_5Config:
    c = QWEN3_5_27B
    return attrs.evolve(c, layers=layers, vocab=vocab, linear=attrs.evolve(c.linear, layers=c.linear.layers[:layers]))


def build(c: Qwen3_5Config, name: str | None = None):
    from spinfc.backend import reference, triton_ops
    from spinfc.runtime.models import build_model
    from spinfc.runtime.load.precision import Precision

    dtype = torch.bfloat16 if on_cuda() else torch.float32
    return build_model(c, qwen3_5_state(c, DEVICE, dtype=dtype), ops=triton_ops if on_cuda() else reference,
                       device=DEVICE, name=name, precision=Precision.uniform(dtype),
                       weights_hash=f"random-qwen3_5-{c.layers}")


def state_bytes_per_content(c: Qwen3_5Config, dtype_bytes: int = 2) -> int:
    """The recurrent states a content leaves for its questions: per linear layer Hv x Dk x Dv float32 and the conv
    state (K - 1) x C in the compute dtype."""
    lin = c.linear
    per = lin.value_heads * lin.key_dim * lin.value_dim * 4 + (lin.conv_kernel - 1) * lin.conv_channels * dtype_bytes
    return sum(lin.layers) * per


def sync():
    if on_cuda():
        torch.cuda.synchronize()


def timed(fn, reps: int = 3) -> float:
    """The best of `reps` runs (no warm-up run: the callers warm up themselves)."""
    return timing.best_of(fn, reps, warm=False, sync=sync).best


# ---- checks ------------------------------------------------------------------------------------------------------


def check_kernel(failures: list) -> dict:
    """fla's chunked and fused kernels against the PyTorch reference: 27B's heads, segments of 1 to 470 rows."""
    from spinfc.backend.gated_delta import gated_delta, reference

    g = torch.Generator(device=DEVICE).manual_seed(1)
    lengths = [470, 20, 1, 1, 64, 129]
    n, Hk, Hv, D = sum(lengths), 16, 48, 128
    q, k = (torch.randn(n, Hk, D, generator=g, device=DEVICE).bfloat16() for _ in range(2))
    v = torch.randn(n, Hv, D, generator=g, device=DEVICE).bfloat16()
    gate = -torch.rand(n, Hv, generator=g, device=DEVICE) * 0.5
    beta = torch.rand(n, Hv, generator=g, device=DEVICE)
    initial = torch.randn(len(lengths), Hv, D, D, generator=g, device=DEVICE) * 0.1
    cu = [0]
    for length in lengths:
        cu.append(cu[-1] + length)
    out, final = gated_delta(q, k, v, gate, beta, cu, initial)
    want, want_final = reference(q.float(), k.float(), v.float(), gate, beta, cu, initial)
    rel = ((out.float() - want).abs().max() / want.abs().max()).item()
    rel_state = ((final - want_final).abs().max() / want_final.abs().max()).item()
    ones = [0, 1, 2, 3]  # three one-row segments (a decode step): the fused recurrent kernel
    o1, f1 = gated_delta(q[:3], k[:3], v[:3], gate[:3], beta[:3], ones, initial[:3])
    w1, wf1 = reference(q[:3].float(), k[:3].float(), v[:3].float(), gate[:3], beta[:3], ones, initial[:3])
    rel_fused = max(((o1.float() - w1).abs().max() / w1.abs().max()).item(),
                    ((f1 - wf1).abs().max() / wf1.abs().max()).item())
    # the branch kernel: the 470-row stem, then its five branches from its final state by index
    from spinfc.backend.kernels.branch_delta import branch_delta

    index = torch.zeros(5, dtype=torch.int64, device=DEVICE)
    keep = torch.arange(5, device=DEVICE)
    b_cu = [c - 470 for c in cu[1:]]
    b_out, b_final = branch_delta(q[470:], k[470:], v[470:], gate[470:], beta[470:], b_cu, want_final[:1], index,
                                  keep)
    w_out, w_final = reference(q[470:].float(), k[470:].float(), v[470:].float(), gate[470:], beta[470:], b_cu,
                               want_final[:1].expand(5, -1, -1, -1))
    rel_branch = max(((b_out.float() - w_out).abs().max() / w_out.abs().max()).item(),
                     ((b_final - w_final).abs().max() / w_final.abs().max()).item())
    rel_fused = max(rel_fused, rel_branch)
    ok = rel < 2e-2 and rel_state < 2e-2 and rel_fused < 2e-2
    if not ok:
        failures.append(f"gated delta kernels vs reference: fla chunked rel {rel:.2e}, state {rel_state:.2e}, fla "
                        f"fused and the branch kernel {rel_fused:.2e}")
    return {"rel_out": rel, "rel_state": rel_state, "rel_fused_and_branch": rel_fused, "ok": ok}


def check_parity(failures: list) -> dict:
    """The stack (float32, Triton ops and fla) against transformers' Qwen3_5ForCausalLM on CUDA, tree launch."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from spinfc.backend import reference, triton_ops
    from spinfc.runtime.models import build_model
    from spinfc.runtime.models.families import from_hf
    from tests.runtime.tree_launch import Case, Question, build_launch, transformers_logprobs

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    hf = Qwen3_5TextConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                           num_attention_heads=6, num_key_value_heads=1, head_dim=64, linear_num_key_heads=2,
                           linear_num_value_heads=6, linear_key_head_dim=64, linear_value_head_dim=64,
                           tie_word_embeddings=False)
    theirs = Qwen3_5ForCausalLM(hf).eval().to(DEVICE)
    with torch.no_grad():
        for name, parameter in theirs.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.3)
    ours = build_model(from_hf(hf.to_dict()), {k: v.detach().clone() for k, v in theirs.state_dict().items()},
                       ops=triton_ops if on_cuda() else reference, device=DEVICE)
    rng = torch.Generator().manual_seed(2)
    draw = lambda n: tuple(torch.randint(1, 512, (n,), generator=rng).tolist())  # noqa: E731
    cases = [Case(draw(L), tuple(Question(draw(6), (draw(1), draw(3))) for _ in range(4))) for L in (150, 40)]
    launch, keys = build_launch([(0, cases[0]), (256, cases[1])], 512)
    got = ours.forward(launch.to(DEVICE)).cpu()
    want = {}
    for index, case in enumerate(cases):
        for key, value in zip(case.reads(), _hf_reads(theirs, case, transformers_logprobs)):
            want[(index, *key)] = value
    gap = (got - torch.stack([want[key] for key in keys]).cpu()).abs().max().item()
    torch.backends.cuda.matmul.allow_tf32 = True
    if gap > 2e-3:
        failures.append(f"stack vs transformers on CUDA (float32): max gap {gap:.2e}")
    return {"max_gap": gap, "ok": gap <= 2e-3}


def _hf_reads(theirs, case, score):
    """transformers' reads of a case, its inputs on the model's device."""
    real = theirs.model.forward

    def on_device(input_ids=None, attention_mask=None, **kw):
        return real(input_ids=input_ids.to(DEVICE), attention_mask=attention_mask.to(DEVICE), **kw)

    theirs.model.forward = on_device
    try:
        return score(theirs, case).cpu()
    finally:
        theirs.model.forward = real


def content_scores(job, outputs, content: str) -> dict:
    return {k: v for k, v in job.scores(outputs).items() if k[0] == content}


def check_invariance(model, c: Qwen3_5Config, budget: int, failures: list) -> dict:
    """Content c0's reads bit-identical: in the job, in the job in reverse order (another offset, pass and
    neighbours), alone, and packed beside contents asked other questions."""
    from benchmarks.harness.launches import compile_job, make_program, seed_job, seed_questions
    from spinfc.backend.launch import lower
    from spinfc.passes.layout import assemble
    from spinfc.shapes import Shapes

    def run(job):
        with torch.inference_mode():
            return [model.forward(padded(launch, T).to(DEVICE)).cpu() for launch in job.launches]

    job = seed_job(c.vocab, max_budget=budget, **JOB)
    T = job.shape[0]  # every launch at the job's row count, as a server's fixed launch size
    reverse = seed_job(c.vocab, max_budget=budget, reverse=True, **JOB)
    base = content_scores(job, run(job), "c0")
    rev = content_scores(reverse, run(reverse), "c0")
    program = job.program
    alone = compile_job(attrs.evolve(make_program([program.contents[0]], list(program.questions), program.budget,
                                                  program.block)), *job.shape[1:])
    solo = content_scores(alone, run(alone), "c0")
    # beside other questions: c0's segment, then segments of contents asked another question set, in one pass
    rng = random.Random(5)
    asked = seed_questions(rng, max(2, JOB["questions"] - 1), JOB["question_tokens"] + 3, c.vocab)
    others = compile_job(make_program(list(program.contents[1:3]), asked, program.budget, program.block))
    shapes = Shapes(program.budget, program.block)
    mixed = assemble([program.segments[0], *others.program.segments], shapes, program.pad)
    launch = lower(mixed, rows_padded_to=job.shape[1] + 200, reads_padded_to=job.shape[2] + 400)
    with torch.inference_mode():
        out = model.forward(padded(launch, T).to(DEVICE)).cpu()
    beside = {("c0", r.question, r.option, r.step): out[i] for i, r in enumerate(mixed.reads) if r.content == 0
              and i < len(program.segments[0].reads)}
    same = {name: all(torch.equal(base[k], other[k]) for k in base)
            for name, other in (("reverse order", rev), ("alone", solo), ("beside other questions", beside))}
    for name, ok in same.items():
        if not ok:
            failures.append(f"invariance: c0's scores differ {name}")
    return {"reads": len(base), **same}


def padded(launch, T: int):
    """The launch with padding rows up to T (each sees only itself)."""
    import dataclasses

    extra = T - launch.budget
    if extra <= 0:
        return launch
    start = launch.budget
    return dataclasses.replace(
        launch, block=None, tokens=torch.cat((launch.tokens, torch.zeros(extra, dtype=torch.int64))),
        positions=torch.cat((launch.positions, torch.zeros(extra, dtype=torch.int64))),
        ends=torch.cat((launch.ends, torch.arange(start + 1, T + 1, dtype=torch.int32))))


# ---- speed -------------------------------------------------------------------------------------------------------


def matmul_rate() -> float:
    """The bf16 matmul rate (float32 on the CPU), FLOP/s: an 8192^3 product (1024^3 on the CPU)."""
    n = 8192 if on_cuda() else 1024
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16 if on_cuda() else torch.float32)
    seconds = timed(lambda: [a @ a for _ in range(10)], 3) / 10
    return 2 * n**3 / seconds


def speed_prelowered(model, c: Qwen3_5Config, budget: int) -> dict:
    from benchmarks.harness.launches import seed_job

    job = seed_job(c.vocab, max_budget=budget, **JOB)
    launches = [launch.to(DEVICE) for launch in job.launches]
    with torch.inference_mode():
        model.forward(launches[0])
        seconds = timed(lambda: [model.forward(launch) for launch in launches], 2)
        scores = job.scores([model.forward(launch).cpu() for launch in launches])
    return {"seconds": seconds, "passes": len(launches), "fill": job.fill, "budget": job.shape[0], "scores": scores}


def speed_rereading(model, c: Qwen3_5Config, budget: int, sample: int = 2) -> dict:
    """Every question as its own sequence (content + question, then its options): `sample` contents' questions
    packed in passes of the same budget, timed and extrapolated to the 24 contents."""
    from benchmarks.harness.launches import compile_job, make_program, seed_job
    from spinfc.ir.nodes import Content

    job = seed_job(c.vocab, max_budget=budget, **JOB)
    program = job.program
    contents = [Content(f"c{i}-q{j}", "", tokens=program.contents[i].tokens + q.tokens)
                for i in range(sample) for j, q in enumerate(program.questions)]
    questions = [attrs.evolve(q, tokens=()) for q in program.questions[:1]]
    each = compile_job(make_program(contents, questions, budget, program.block))
    launches = [launch.to(DEVICE) for launch in each.launches]
    with torch.inference_mode():
        model.forward(launches[0])
        seconds = timed(lambda: [model.forward(launch) for launch in launches], 1)
    return {"seconds": seconds * len(program.contents) / sample, "sampled_contents": sample,
            "passes_sampled": len(launches)}


def loader(config: str, name: str, device: str):
    """The `load_model` of the in-process engine and of the server (harness/serve_app.py builds it in the server's
    process): the random-weight stack of `config` (a Qwen3_5Config's JSON) on `device`, the same in both."""
    global DEVICE
    DEVICE = device
    c = Qwen3_5Config.from_json(config)
    return lambda _name, _precision, _device: build(c, name)


def engine_and_http(c: Qwen3_5Config, tokenizer_dir: Path, skip_http: bool) -> dict:
    """The job through `start_engine` in this process and over HTTP through `spinfc serve` (the same model made by
    `loader` in the server), default settings (a small budget on the CPU)."""
    from spinfc.config import EngineSettings
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.start import start_engine

    folder = models.config_folder(Path("/tmp/spinfc-qwen3_5-model"), {"model_type": "qwen3_5_text"}, tokenizer_dir)
    job = jobs.text_job(load_tokenizer(str(folder)), JOB["contents"], JOB["content_tokens"], JOB["questions"])
    budget = () if on_cuda() else ("--token-budget", "1024")
    out = {"questions": job.questions}
    running = start_engine(EngineSettings(model=str(folder), device=DEVICE, **({} if on_cuda() else
                                                                                 {"token_budget": 1024})),
                           load_model=loader(c.to_json(), str(folder), DEVICE))
    engine = running.engine

    async def score():
        return await engine.score(await engine.compile_async(job.whole))

    try:
        timed = timing.best_of(lambda: asyncio.run(score()), 2)
        out["engine"] = {"seconds": timed.best, "questions_per_s": timed.rate(job.questions)}
    finally:
        running.stop()
        del running, engine
        if on_cuda():
            torch.cuda.empty_cache()
    if not skip_http:
        spec = ("benchmarks.gpu_qwen3_5:loader", {"config": c.to_json(), "name": str(folder), "device": DEVICE})
        with serving.served(folder, DEVICE, folder / "server.log", args=budget, loader=spec) as server:
            clients.pattern(server.url, [job.whole], 1, job.questions)  # warm (and the floor cached)
            best = min((clients.pattern(server.url, [job.whole], 1, job.questions) for _ in range(2)),
                       key=lambda r: r["seconds"])
            out["http"] = {"seconds": best["seconds"], "questions_per_s": best["questions_per_s"]}
    return out


def main(argv: list[str] | None = None) -> None:
    global DEVICE
    args = ARGS.parse_args(argv)
    failures: list[str] = []
    if args.small:
        DEVICE, args.budget, args.layers = "cpu", 512, 4
        JOB.update(SMALL_SEED)
    results: dict = {"torch": torch.__version__,
                     "device": torch.cuda.get_device_name(0) if on_cuda() else "cpu"}
    if on_cuda():
        print("kernel: fla vs reference ...", flush=True)
        results["kernel"] = check_kernel(failures)
        print(results["kernel"], flush=True)
    print("parity: stack vs transformers (float32) ...", flush=True)
    results["parity"] = check_parity(failures)
    print(results["parity"], flush=True)
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(str(args.tokenizer)))
    c = tiny(vocab) if args.small else shape(args.layers, vocab)
    print(f"building the 27B-shape model ({args.layers} layers, bf16) ...", flush=True)
    model = build(c)
    print("invariance ...", flush=True)
    results["invariance"] = check_invariance(model, c, args.budget, failures)
    print(results["invariance"], flush=True)
    rate = matmul_rate()
    floor = 2 * qwen3_5_params(c) * job_tokens() / rate
    results["floor"] = {"seconds": floor, "tflops": rate / 1e12, "questions_per_s": job_questions() / floor}
    from spinfc.runtime.models import state_flow

    print("pre-lowered passes (branches on the branch kernel) ...", flush=True)
    results["prelowered"] = speed_prelowered(model, c, args.budget)
    if on_cuda():
        print("pre-lowered passes (branches on fla's chunked kernel, initial states gathered) ...", flush=True)
        rows, state_flow.BRANCH_ROWS = state_flow.BRANCH_ROWS, 0
        results["prelowered_fla"] = speed_prelowered(model, c, args.budget)
        state_flow.BRANCH_ROWS = rows
        a, b = results["prelowered"]["scores"], results["prelowered_fla"].pop("scores")
        gap = max(abs(float(a[key]) - float(b[key])) for key in a)
        results["prelowered_fla"]["max_gap_to_branch_kernel"] = gap
        if gap > 0.05:
            failures.append(f"the branch kernel and fla disagree on the job's scores by {gap:.3f}")
    results["prelowered"].pop("scores")
    print({k: v for k, v in results.items() if k.startswith("prelowered")}, flush=True)
    print("re-reading baseline ...", flush=True)
    results["rereading"] = speed_rereading(model, c, args.budget)
    print(results["rereading"], flush=True)
    del model
    if on_cuda():
        torch.cuda.empty_cache()
    print("engine and HTTP ...", flush=True)
    results["served"] = engine_and_http(c, args.tokenizer, args.skip_http)
    results["state_bytes_per_content"] = state_bytes_per_content(c)
    scale = 64 / args.layers
    n = job_questions()
    rows = [("pre-lowered passes (branch kernel)", results["prelowered"]["seconds"])]
    if "prelowered_fla" in results:
        rows.append(("pre-lowered passes (fla for the branches)", results["prelowered_fla"]["seconds"]))
    rows.append(("engine, in-process", results["served"]["engine"]["seconds"]))
    if "http" in results["served"] and "seconds" in results["served"]["http"]:
        rows.append(("over HTTP, default settings", results["served"]["http"]["seconds"]))
    rows.append(("re-reading: each question its own sequence (extrapolated)", results["rereading"]["seconds"]))
    print(f"\nQwen3.5-27B shape, {args.layers} of 64 layers (times x{scale:g} for the whole model), bf16, "
          f"seed job ({n} questions)")
    print(f"{'path':<60} {'seconds':>9} {'questions/s':>12} {'of floor':>9}")
    for label, seconds in rows:
        print(f"{label:<60} {seconds:>9.3f} {n / seconds:>12.1f} {floor / seconds:>8.1%}")
    print(f"{'floor at ' + format(rate / 1e12, '.0f') + ' TFLOP/s':<60} {floor:>9.3f} {n / floor:>12.1f}")
    print(f"state per content: {results['state_bytes_per_content'] / 2**20:.1f} MiB ({args.layers} layers); "
          f"re-reading / branching: {results['rereading']['seconds'] / results['prelowered']['seconds']:.1f}x")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
