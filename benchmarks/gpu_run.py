"""The throughput half of `benchmarks/gpu.py`: the seed-shaped job at Llama-3-8B shape (random bf16 weights,
shared by every path), run by spinfc's packed Triton path, by the same passes with FlexAttention, and by
transformers with and without the content's KV cache reused; plus the matmul rate that sets the floor."""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from benchmarks.gpu_baselines import FlexTreeAttention, flex_ops, hf_kv_reuse, hf_llama, hf_one_per_question
from benchmarks.gpu_checks import prepare
from benchmarks.harness import timing
from benchmarks.harness.stacks import LLAMA3_8B, TINY, non_embedding_params
from benchmarks.harness.launches import compile_job, make_program, seed_job
from spinfc.backend import triton_ops
from spinfc.runtime.models import build_model

SEED_JOB = dict(contents=24, content_tokens=470, questions=56, question_tokens=20)
TINY_JOB = dict(contents=3, content_tokens=40, questions=4, question_tokens=5, max_budget=256)


def max_gap(a: dict, b: dict) -> float:
    common = [k for k in a if k in b]
    return max(abs(float(a[k]) - float(b[k])) for k in common) if common else float("nan")


class Bench:
    def __init__(self, device: str, dtype: torch.dtype, smoke: bool, results: dict):
        self.device, self.dtype, self.smoke, self.results = device, dtype, smoke, results
        self.config = TINY if smoke else LLAMA3_8B
        self.spec = TINY_JOB if smoke else SEED_JOB
        self.paths = results.setdefault("paths", {})  # name -> {seconds, questions, ...}
        self.scores: dict[str, dict] = {}

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def timed(self, fn):
        return timing.once(fn, self.sync)

    def bench_ms(self, fn, warmup: int = 3, reps: int = 10) -> float:
        return timing.device_ms(fn, self.device, warmup, reps)

    def run(self, model, job) -> list[torch.Tensor]:
        """Every pass of `job` through `model` (launch tensors copied to the device inside), in order."""
        return [model.forward(launch.to(self.device)) for launch in job.launches]

    # ---- set-up ---------------------------------------------------------------------------------------------

    def build(self) -> None:
        c, s = self.config, self.spec
        seconds, self.hf = self.timed(lambda: hf_llama(c, self.device, self.dtype))
        self.state = self.hf.state_dict()  # shared by every path: no second copy of the weights
        self.ours = build_model(c, self.state, ops=triton_ops, weights_hash="random-weights")
        compile_seconds, self.job = self.timed(lambda: seed_job(c.vocab, **self.spec))
        warm_seconds, self.model = self.timed(lambda: prepare(self.ours, [self.job.shape], self.device))
        questions = s["contents"] * s["questions"]
        tokens = s["contents"] * (s["content_tokens"] + s["questions"] * s["question_tokens"])
        self.results["job"] = {
            "contents": s["contents"], "questions": questions, "tokens": tokens, "shape": self.job.shape,
            "passes": len(self.job.launches), "block": self.job.program.plan.block, "fill": round(self.job.fill, 4),
            "rows_total": len(self.job.launches) * self.job.shape[0], "non_embedding_params": non_embedding_params(c),
            "compile_seconds": round(compile_seconds, 2), "warm_up_seconds": round(warm_seconds, 1),
            "model_build_seconds": round(seconds, 1),
        }
        print(self.results["job"], flush=True)

    def matmul_rates(self) -> None:
        """bf16 TFLOP/s of (a) an 8192^3 product and (b) one layer's products at the pass's row count."""
        c, T = self.config, self.job.shape[0]
        n = 256 if self.smoke else 8192
        a, b = torch.randn(n, n, device=self.device, dtype=self.dtype), torch.randn(n, n, device=self.device,
                                                                                   dtype=self.dtype)
        square = 2 * n**3 / self.bench_ms(lambda: a @ b) / 1e9
        x = torch.randn(T, c.hidden, device=self.device, dtype=self.dtype)
        m = torch.randn(T, c.intermediate, device=self.device, dtype=self.dtype)
        w = self.ours.layers[0]  # the products the model runs: fused q/k/v and gate/up where it fused them
        names = ("qkv", "o", "gate_up", "down") if "qkv" in w else ("q", "k", "v", "o", "gate", "up", "down")
        products = [(m if name == "down" else x, w[name]) for name in names]
        flops = sum(2 * T * weight.shape[0] * weight.shape[1] for _, weight in products)
        layer = flops / self.bench_ms(lambda: [F.linear(i, weight) for i, weight in products]) / 1e9
        self.results["matmul_tflops"] = {"square_8192": round(square, 3), "model_layer": round(layer, 3)}
        print(self.results["matmul_tflops"], flush=True)

    # ---- spinfc's packed passes ------------------------------------------------------------------------------

    def packed_triton(self, reps: int) -> None:
        times = []
        for _ in range(reps):
            seconds, outputs = self.timed(lambda: self.run(self.model, self.job))
            times.append(seconds)
        self.scores["ours"] = self.job.scores(outputs)
        self.paths["packed Triton (CUDA graph)"] = {"seconds": statistics.median(times), "all": times}
        eager, _ = self.timed(lambda: self.run(self.ours, self.job))
        self.paths["packed Triton (eager)"] = {"seconds": eager}
        print(self.paths["packed Triton (CUDA graph)"], "eager", round(eager, 3), flush=True)

    def invariance_at_shape(self) -> None:
        """The whole job with its contents in reverse order (each content in another pass, at another offset,
        next to other neighbours), and content c0 alone in a pass: every read torch.equal to the job's."""
        reversed_job = seed_job(self.config.vocab, reverse=True, **self.spec)
        program = self.job.program
        alone = compile_job(make_program([program.contents[0]], list(program.questions), program.plan.budget,
                                         program.plan.block), rows=self.job.shape[1], reads=self.job.shape[2])
        assert reversed_job.shape == self.job.shape == alone.shape, (reversed_job.shape, alone.shape)
        ours = self.scores["ours"]
        reordered = reversed_job.scores(self.run(self.model, reversed_job))
        by_itself = alone.scores(self.run(self.model, alone))
        self.results["invariance_at_shape"] = {
            "reversed_order_all_equal": all(torch.equal(ours[k], reordered[k]) for k in ours),
            "reads": len(ours),
            "c0_alone_equal": all(torch.equal(ours[k], by_itself[k]) for k in by_itself),
            "c0_reads": len(by_itself),
        }
        print(self.results["invariance_at_shape"], flush=True)

    def attention_alone(self) -> None:
        """One layer's attention over pass 0 (random q, k, v): the Triton kernel and compiled FlexAttention."""
        c, launch = self.config, self.job.launches[0].to(self.device)
        T = launch.budget
        q = torch.randn(T, c.heads, c.head_dim, device=self.device, dtype=self.dtype)
        k, v = (torch.randn(T, c.kv_heads, c.head_dim, device=self.device, dtype=self.dtype) for _ in range(2))
        args = (q, k, v, launch.ends, launch.positions, launch.spans)
        triton_ms = self.bench_ms(lambda: triton_ops.tree_attention(*args, scale=c.attention_scale, window=None))
        self.flex = FlexTreeAttention(compile=not self.smoke)
        mask_ms = self.bench_ms(lambda: self.flex.create_block_mask(
            lambda b, h, qi, ki: (ki <= qi) & (qi < launch.ends[ki]), None, None, T, T, device=self.device,
            BLOCK_SIZE=128), warmup=1, reps=3)
        flex_ms = self.bench_ms(lambda: self.flex(*args, scale=c.attention_scale, window=None))
        calls = c.layers * len(self.job.launches)
        self.results["attention"] = {
            "triton_ms_per_layer": round(triton_ms, 3), "flex_ms_per_layer": round(flex_ms, 3),
            "flex_block_mask_ms_per_pass": round(mask_ms, 2),
            "triton_job_seconds": round(triton_ms * calls / 1000, 4),
            "flex_job_seconds": round((flex_ms * calls + mask_ms * len(self.job.launches)) / 1000, 4),
        }
        print(self.results["attention"], flush=True)

    def ops_alone(self) -> None:
        """One layer's element-wise ops at the pass's rows, timed alone, and what they add up to over the job
        (with the layer's matmuls at the measured rate): where the time goes."""
        c, T = self.config, self.job.shape[0]
        new = lambda *shape: torch.randn(*shape, device=self.device, dtype=self.dtype)  # noqa: E731
        x, r, w = new(T, c.hidden), new(T, c.hidden), new(c.hidden)
        qkv = new(T, c.heads + 2 * c.kv_heads, c.head_dim)
        gate_up = new(T, 2 * c.intermediate)
        positions = self.job.launches[0].positions.to(self.device)
        ms = {
            # the model's two norms a layer: of one tensor when its residual adds run inside the products
            "norms_x2": 2 * self.bench_ms(lambda: triton_ops.rms_norm(x, w, 1e-5, False)
                                          if self.ours.residual_in_matmul
                                          else triton_ops.add_rms_norm(x, r, w, 1e-5, False)),
            "rope_q_and_k": self.bench_ms(lambda: (  # q and k as views of a fused qkv output, as the model runs it
                triton_ops.apply_rope(qkv[:, :c.heads], positions, 5e5),
                triton_ops.apply_rope(qkv[:, c.heads:c.heads + c.kv_heads], positions, 5e5))),
            "gated_act": self.bench_ms(lambda: triton_ops.gated_act(gate_up[:, :c.intermediate],
                                                                  gate_up[:, c.intermediate:], "silu")),
        }
        ms["attention"] = self.results.get("attention", {}).get("triton_ms_per_layer", float("nan"))
        rate = self.results.get("matmul_tflops", {}).get("model_layer", float("nan"))
        ms["matmuls_at_measured_rate"] = 2 * (non_embedding_params(c) / c.layers) * T / (rate * 1e12) * 1000 \
            if rate > 0 else float("nan")
        passes = len(self.job.launches)
        self.results["layer_ms"] = {name: round(value, 3) for name, value in ms.items()}
        self.results["layer_ms"]["sum_over_job_seconds"] = round(sum(ms.values()) * c.layers * passes / 1000, 4)
        print(self.results["layer_ms"], flush=True)

    def packed_flex(self) -> None:
        flex = getattr(self, "flex", None) or FlexTreeAttention(compile=not self.smoke)
        model = build_model(self.config, self.state, ops=flex_ops(flex), weights_hash="random-weights")
        first, outputs = self.timed(lambda: self.run(model, self.job))  # compiles flex for this shape
        times = [self.timed(lambda: self.run(model, self.job))[0] for _ in range(2)]
        self.scores["flex"] = self.job.scores(outputs)
        self.paths["packed FlexAttention"] = {"seconds": statistics.median(times), "all": times,
                                              "first_run_seconds": first,
                                              "max_gap_to_triton": max_gap(self.scores["flex"],
                                                                           self.scores.get("ours", {}))}
        print(self.paths["packed FlexAttention"], flush=True)

    # ---- transformers ----------------------------------------------------------------------------------------

    def _hf_inputs(self, index: int):
        program = self.job.program
        content = torch.tensor(program.contents[index].tokens, device=self.device)
        questions = torch.tensor([q.tokens for q in program.questions], device=self.device)  # [Q, S]
        options = torch.tensor([o.tokens[0] for o in program.questions[0].slot.options], device=self.device)
        return program.contents[index].id, content, questions, options

    def _hf_scores(self, run, contents: list[int]) -> dict:
        found = {}
        for index in contents:
            cid, content, questions, options = self._hf_inputs(index)
            logprobs = run(self.hf, content, questions, options)  # [Q, O]
            for j in range(logprobs.shape[0]):
                for o in range(logprobs.shape[1]):
                    found[(cid, j, o, 0)] = logprobs[j, o]
        return found

    def hf_kv_reuse(self) -> None:
        self._hf_scores(hf_kv_reuse, [0])  # warm-up
        seconds, found = self.timed(lambda: self._hf_scores(hf_kv_reuse, list(range(self.spec["contents"]))))
        self.paths["transformers, KV cache reused"] = {
            "seconds": seconds, "max_gap_to_triton": max_gap(found, self.scores.get("ours", {}))}
        print(self.paths["transformers, KV cache reused"], flush=True)

    def hf_one_per_question(self, contents: int) -> None:
        contents = min(contents, self.spec["contents"])
        self._hf_scores(hf_one_per_question, [0])  # warm-up
        seconds, found = self.timed(lambda: self._hf_scores(hf_one_per_question, list(range(contents))))
        self.paths["transformers, one sequence per question"] = {
            "seconds": seconds * self.spec["contents"] / contents, "measured_seconds": seconds,
            "extrapolated_from_contents": contents, "batch": self.spec["questions"],
            "max_gap_to_triton": max_gap(found, self.scores.get("ours", {}))}
        print(self.paths["transformers, one sequence per question"], flush=True)
