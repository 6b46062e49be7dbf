"""spinfc on one H200: parity, batch invariance, and the seed-shaped job at Llama-3-8B shape against the baselines.

    python -m benchmarks.gpu            # from the repository root; about 3 to 5 minutes on one H200
    python -m benchmarks.gpu --smoke    # the same code on the CPU, tiny shapes (Triton interpreter, float32)

Imports beyond the standard library: torch, triton, transformers, and attrs (spinfc's IR); nothing else (the
tokenizer-free job needs no lark, gguf or msgspec). Results go to stdout (a table last) and, when $OUT is set,
to $OUT/gpu_benchmark.json, rewritten after every section so a failure or a timeout keeps what was measured.
Each section runs on its own: one that fails prints its traceback and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the script, measures nothing")
ARGS.add_argument("--hf-contents", type=int, default=4, help="contents run one sequence per question (extrapolated)")
ARGS.add_argument("--reps", type=int, default=3, help="timed repetitions of the packed job (median)")
OPTIONS = ARGS.parse_args([])  # main() parses the command line

import torch

from benchmarks import gpu_checks
from benchmarks.gpu_report import report, table
from benchmarks.gpu_run import Bench
from benchmarks.harness.stacks import TINY
from benchmarks.harness.smoke import interpreted

RESULTS: dict = {"errors": {}, "sections": {}}
STARTED = time.perf_counter()


def save() -> None:
    out = os.environ.get("OUT")
    if out:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, "gpu_benchmark.json").write_text(json.dumps(RESULTS, indent=1, default=str))
        except OSError as error:
            print(f"!! could not write {out}/gpu_benchmark.json: {error}", flush=True)


@contextmanager
def section(name: str):
    began = time.perf_counter()
    print(f"\n== {name} (at {began - STARTED:.0f} s)", flush=True)
    try:
        yield
    except Exception as error:  # a section's failure is recorded; the next section still runs
        RESULTS["errors"][name] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
        print(f"!! {name} FAILED: {type(error).__name__}: {error}", flush=True)
    finally:
        RESULTS["sections"][name] = round(time.perf_counter() - began, 1)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        save()


def main(argv: list[str] | None = None) -> None:
    global OPTIONS
    OPTIONS = ARGS.parse_args(argv)
    if OPTIONS.smoke:
        interpreted("benchmarks.gpu", argv)
    smoke = OPTIONS.smoke
    device = "cpu" if smoke else "cuda"
    dtype = torch.float32 if smoke else torch.bfloat16
    RESULTS["environment"] = environment(device)
    print(json.dumps(RESULTS["environment"]), flush=True)
    with section("kernel parity"):
        errors = gpu_checks.kernel_parity(device, dtype, small=smoke)
        RESULTS["kernel_parity"] = {"rel_errors": errors, "ok": all(e < 2e-2 for e in errors.values())}
        print(json.dumps(errors, indent=1))
    with section("model parity"):
        parity = gpu_checks.model_parity(device, dtype, small=smoke)
        ok = all(r["finite"] and r["max_abs"] <= 2e-2 for r in parity.values())
        RESULTS["model_parity"] = {"families": parity, "ok": ok}
        print(json.dumps(parity, indent=1))
    with section("batch invariance"):
        result = gpu_checks.invariance(device, dtype, others=20, config=TINY) if smoke else \
            gpu_checks.invariance(device, dtype)
        result["ok"] = result["packed_with_others"] and result["two_passes_reversed"]
        RESULTS["invariance"] = result
        print(json.dumps(result, indent=1, default=str))
    with section("attention invariance"):
        result = gpu_checks.attention_invariance(device, dtype)
        RESULTS["attention_invariance"] = result
        print(json.dumps(result, indent=1))
    bench = Bench(device, dtype, smoke, RESULTS)
    with section("Llama-3-8B shape: build"):
        bench.build()
    with section("matmul rate"):
        bench.matmul_rates()
    with section("packed Triton job"):
        bench.packed_triton(OPTIONS.reps)
    with section("invariance at 8B shape"):
        bench.invariance_at_shape()
    with section("attention alone"):
        bench.attention_alone()
    with section("element-wise ops alone"):
        bench.ops_alone()
    with section("packed FlexAttention job"):
        bench.packed_flex()
    with section("transformers, KV cache reused"):
        bench.hf_kv_reuse()
    with section("transformers, one sequence per question"):
        bench.hf_one_per_question(OPTIONS.hf_contents)
    RESULTS["total_seconds"] = round(time.perf_counter() - STARTED, 1)
    with section("report"):
        report(RESULTS)
        print(table(RESULTS), flush=True)


def environment(device: str) -> dict:
    import triton
    import transformers

    info = {"torch": torch.__version__, "triton": triton.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (smoke)"}
    return info


if __name__ == "__main__":
    main()
