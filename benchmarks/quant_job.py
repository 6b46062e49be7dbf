"""The seed-shaped job at Llama-3-8B shape per numeric scheme, for `benchmarks/gpu_quant.py` and
`benchmarks/gpu_gemma4.py`: seconds, questions/s, each scheme's floor, and alone-vs-packed bit identity."""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks.harness.stacks import LLAMA3_8B, TINY, non_embedding_params, random_state_dict
from benchmarks.harness.launches import compile_job, make_program, prepared, seed_job
from benchmarks.quant_parts import build

from spinfc.backend import split_product

FP8_RATE_DESIGN = 1397.0  # TFLOP/s, measured on this H200 (DESIGN.md)
SEED_JOB = dict(contents=24, content_tokens=470, questions=56, question_tokens=20)
TINY_JOB = dict(contents=3, content_tokens=40, questions=4, question_tokens=5, max_budget=256)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_job(model, job, device: str) -> list[torch.Tensor]:
    return [model.forward(launch.to(device)) for launch in job.launches]


class JobBench:
    """The seed-shaped job at Llama-3-8B shape (TINY on --smoke), one model per scheme on the same weights."""

    def __init__(self, device: str, smoke: bool):
        self.device, self.smoke = device, smoke
        self.config = TINY if smoke else LLAMA3_8B
        self.spec = TINY_JOB if smoke else SEED_JOB
        began = time.perf_counter()
        dtype = torch.float32 if smoke else torch.bfloat16
        self.state = {k: v.to(dtype) for k, v in random_state_dict(self.config, device, seed=0).items()}
        self.job = seed_job(self.config.vocab, **self.spec)
        self.calibration = seed_job(self.config.vocab, seed=7, **self.spec).launches[:1]  # another random job
        s = self.spec
        self.info = {"questions": s["contents"] * s["questions"], "shape": self.job.shape,
                     "passes": len(self.job.launches),
                     "tokens": s["contents"] * (s["content_tokens"] + s["questions"] * s["question_tokens"]),
                     "non_embedding_params": non_embedding_params(self.config),
                     "build_seconds": round(time.perf_counter() - began, 1)}

    def scheme(self, name: str, reps: int, separate_quantize: bool = False) -> dict:
        """Scheme `name` (see quant_parts.ALL) timed over `reps` runs of the packed job; `separate_quantize`: the
        quantized layers' inputs quantized in their own pass (as before the norms and the gated activation wrote
        them), to compare."""
        began = time.perf_counter()
        model = build(self.config, self.state, name, self.device, calibration=self.calibration)
        model.quantize_in_kernels = not separate_quantize
        built = time.perf_counter() - began
        graphed = prepared(model, [self.job.shape], self.device)
        warm = time.perf_counter() - began - built
        times = []
        for _ in range(reps):
            sync(self.device)
            t0 = time.perf_counter()
            outputs = run_job(graphed, self.job, self.device)
            sync(self.device)
            times.append(time.perf_counter() - t0)
        scores = self.job.scores(outputs)
        program = self.job.program
        reversed_job = seed_job(self.config.vocab, reverse=True, **self.spec)
        alone = compile_job(make_program([program.contents[0]], list(program.questions), program.plan.budget,
                                         program.plan.block), rows=self.job.shape[1], reads=self.job.shape[2])
        reordered = reversed_job.scores(run_job(graphed, reversed_job, self.device))
        by_itself = alone.scores(run_job(graphed, alone, self.device))
        seconds = statistics.median(times)
        result = {"seconds": seconds, "all": times, "questions_per_s": self.info["questions"] / seconds,
                  "build_seconds": round(built, 1), "warm_up_seconds": round(warm, 1),
                  "reversed_order_all_equal": all(torch.equal(scores[k], reordered[k]) for k in scores),
                  "c0_alone_equal": all(torch.equal(scores[k], by_itself[k]) for k in by_itself),
                  "fingerprint_scheme": model.scheme, "quantize_in_kernels": model.quantize_in_kernels,
                  "float32_output_gemms": split_product.float32_outputs()}
        if self.device.startswith("cuda"):
            from spinfc.backend.invariance import check_row_invariance

            try:  # what a server checks at start-up: every GEMM of the first and last layers at the launch's rows
                check_row_invariance(model, self.job.shape[0], self.job.shape[1])
                result["start_up_row_invariance"] = "ok"
            except Exception as error:
                result["start_up_row_invariance"] = f"FAILED: {error}"
        del graphed, model
        return result


def floors_of(job: dict | None, rates: dict, schemes: dict) -> None:
    """Each scheme's floor: 2 x non-embedding parameters x job tokens at its matmul rate (fp8: also at DESIGN.md's
    1,397 TFLOP/s); fraction of floor = floor seconds / measured seconds. Adds the fields to `schemes`' rows."""
    if not job:
        return
    flops = 2 * job["non_embedding_params"] * job["tokens"]
    rate_of = {"bf16": rates.get("bf16_square"), "fp8": max(filter(None, (rates.get("fp8_square"), FP8_RATE_DESIGN))),
               "int8": rates.get("int8_square")}
    for name, path in schemes.items():
        if not isinstance(path, dict) or "seconds" not in path:
            continue
        kind = "fp8" if name.startswith("fp8") else "int8" if name.startswith("int8") else "bf16"
        rate = rate_of.get(kind)
        if rate:
            floor = flops / (rate * 1e12)
            path.update(floor_rate_tflops=rate, floor_questions_per_s=job["questions"] / floor,
                        of_floor=floor / path["seconds"])
