"""W8A8 schemes on one H200: the seed-shaped job at Llama-3-8B shape in bf16, bf16-mixed, fp8-static and
int8-static; each scheme's floor, its logprob gap to float32 on the same weights, and its batch invariance.

    python -m benchmarks.gpu_quant            # from the repository root; about 3 to 5 minutes on one H200
    python -m benchmarks.gpu_quant --smoke    # the same code on the CPU, tiny shapes (Triton interpreter)

Sections (each runs on its own; one that fails prints its traceback and the others still run):
  rates        bf16 / fp8 (`_scaled_mm`) / int8 (`_int_mm`) TFLOP/s of an 8192^3 product and of one layer's products
  gemm rows    every GEMM shape of the fixed launch, per scheme: a row bit-identical when every other row changes,
               and across M (the pass's rows, and smaller counts); any difference is printed as FAILED
  gap          small random-weight models (llama, qwen3, gemma3 shapes): max |logprob - float32 reference| per scheme,
               and whether an explicit float32 runs on the Triton path
  job          the seed-shaped job at Llama-3-8B shape (random weights), per scheme: seconds, questions/s, fraction
               of the scheme's floor; the job reversed and content c0 alone: every read bit-identical
Imports beyond the standard library: torch, triton, transformers, attrs (spinfc's IR) and compressed-tensors (the
scales' arithmetic); results to stdout (a table last) and to $OUT/gpu_quant.json after every section.
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
ARGS.add_argument("--reps", type=int, default=3, help="timed repetitions of the packed job (median)")
ARGS.add_argument("--schemes", nargs="+", default=None, help="the job section's schemes (default: every one of "
                  "quant_parts.ALL: bf16, bf16-mixed, fp8-static[-mixed], int8-static[-mixed], fp8-dynamic[-mixed])")
OPTIONS = ARGS.parse_args([])  # main() parses the command line

import torch

from benchmarks.harness.launches import prepared, seed_job, small_job
from benchmarks.harness.stacks import LLAMA3_8B, SMALL_CONFIGS, random_state_dict
from benchmarks.harness.smoke import interpreted
from benchmarks.quant_job import JobBench, floors_of, run_job
from benchmarks.quant_parts import ALL, build, gemm_shapes, matmul_rates, row_invariance

RESULTS: dict = {"errors": {}, "sections": {}}
STARTED = time.perf_counter()


def save() -> None:
    out = os.environ.get("OUT")
    if out:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, "gpu_quant.json").write_text(json.dumps(RESULTS, indent=1, default=str))
        except OSError as error:
            print(f"!! could not write {out}/gpu_quant.json: {error}", flush=True)


@contextmanager
def section(name: str):
    began = time.perf_counter()
    print(f"\n== {name} (at {began - STARTED:.0f} s)", flush=True)
    try:
        yield
    except Exception as error:
        RESULTS["errors"][name] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
        print(f"!! {name} FAILED: {type(error).__name__}: {error}", flush=True)
    finally:
        RESULTS["sections"][name] = round(time.perf_counter() - began, 1)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        save()


def max_gap(got: dict, want: dict) -> float:
    return max(abs(float(got[k]) - float(want[k])) for k in want)


def gaps(device: str, smoke: bool) -> dict:
    """Per family: each scheme's max |logprob gap| to the float32 reference ops on the same (float32) weights;
    the activation scales come from another random job (held out from the one scored)."""
    from spinfc.backend import reference

    found = {}
    for family, config in SMALL_CONFIGS.items():
        state = random_state_dict(config, device, seed=0)
        shape = dict(contents=3, budget=512, block=64, content_tokens=(20, 80)) if smoke else \
            dict(contents=8, budget=2048, block=64)
        job, held_out = small_job(config.vocab, seed=1, **shape), small_job(config.vocab, seed=2, **shape)
        want = job.scores(run_job(build(config, state, "float32", device, ops=reference), job, device))
        row = {}
        for name in ALL + ("float32",):
            try:
                model = build(config, state, name, device, calibration=held_out.launches)
                got = job.scores(run_job(prepared(model, [job.shape], device), job, device))
                row[name] = round(max_gap(got, want), 5)
            except Exception as error:  # e.g. float32 on the Triton path: say what failed, measure the rest
                row[name] = f"{type(error).__name__}: {str(error)[:200]}"
        found[family] = row
        print(family, row, flush=True)
    return found


def floors(results: dict) -> None:
    floors_of(results.get("job"), results.get("rates", {}), results.get("schemes", {}))


def table(results: dict) -> str:
    lines = ["", "| scheme | seconds | questions/s | of its floor (TFLOP/s) | reversed equal | c0 alone equal |"
             " max gap llama/qwen3/gemma3 |", "| --- | ---: | ---: | ---: | --- | --- | --- |"]
    gap = results.get("gap", {})
    for name, path in results.get("schemes", {}).items():
        gaps_here = "/".join(str(gap.get(f, {}).get(name, "-")) for f in ("llama", "qwen3", "gemma3"))
        if not isinstance(path, dict) or "seconds" not in path:
            lines.append(f"| {name} | FAILED: {path} | | | | | {gaps_here} |")
            continue
        floor = f"{path['of_floor']:.1%} ({path['floor_rate_tflops']:.0f})" if "of_floor" in path else "-"
        lines.append(f"| {name} | {path['seconds']:.3f} | {path['questions_per_s']:,.0f} | {floor} | "
                     f"{path['reversed_order_all_equal']} | {path['c0_alone_equal']} | {gaps_here} |")
    if "float32" in next(iter(gap.values()), {}):
        lines.append("float32 on the Triton path (gap per family): " +
                     ", ".join(f"{f} {row.get('float32')}" for f, row in gap.items()))
    lines.append(f"rates (TFLOP/s): {results.get('rates')}")
    rows = results.get("gemm_rows", {})
    bad = [f"{scheme} {shape}: {what}" for scheme, checks in rows.items() for shape, what in checks.items()
           if what != "ok"]
    verdict = "NOT RUN" if not rows else "all ok" if not bad else "FAILED: " + "; ".join(bad)
    lines.append(f"GEMM row invariance: {verdict}")
    if results.get("errors"):
        lines.append("failed sections: " + "; ".join(f"{k}: {v}" for k, v in results["errors"].items()))
    lines.append(f"total {results.get('total_seconds', '?')} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    global OPTIONS
    OPTIONS = ARGS.parse_args(argv)
    if OPTIONS.smoke:
        interpreted("benchmarks.gpu_quant", argv)
    smoke = OPTIONS.smoke
    device = "cpu" if smoke else "cuda"
    RESULTS["environment"] = {"torch": torch.__version__,
                              "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (smoke)"}
    print(json.dumps(RESULTS["environment"]), flush=True)
    config = SMALL_CONFIGS["llama"] if smoke else LLAMA3_8B
    if not smoke:
        with section("rates"):
            RESULTS["rates"] = matmul_rates(device, config)
            print(RESULTS["rates"], flush=True)
    with section("gemm rows"):
        rows, answer_rows = (256, 32) if smoke else seed_job(config.vocab).shape[:2]  # the job's fixed launch
        RESULTS["gemm_rows"] = row_invariance(device, gemm_shapes(config, rows, answer_rows), smoke=smoke)
        print(json.dumps(RESULTS["gemm_rows"], indent=1), flush=True)
    with section("gap"):
        RESULTS["gap"] = gaps(device, smoke)
    bench = None
    with section("job: build"):
        bench = JobBench(device, smoke)
        RESULTS["job"] = bench.info
        print(bench.info, flush=True)
    schemes = RESULTS.setdefault("schemes", {})
    for name in OPTIONS.schemes or ALL:
        with section(f"job: {name}"):
            if bench is None:
                raise RuntimeError("the job was not built")
            schemes[name] = "did not finish"
            schemes[name] = bench.scheme(name, OPTIONS.reps)
            print(name, {k: v for k, v in schemes[name].items() if k != "all"}, flush=True)
    RESULTS["total_seconds"] = round(time.perf_counter() - STARTED, 1)
    with section("report"):
        floors(RESULTS)
        print(table(RESULTS), flush=True)
    broken = [f"{scheme} {shape}" for scheme, checks in RESULTS.get("gemm_rows", {}).items()
              for shape, what in checks.items() if what != "ok"]
    broken += [f"{name} {check}" for name, path in RESULTS.get("schemes", {}).items() if isinstance(path, dict)
               for check in ("reversed_order_all_equal", "c0_alone_equal") if path.get(check) is False]
    if broken:  # loudly, after everything was measured and saved
        print(f"!! BATCH INVARIANCE FAILED: {'; '.join(broken)}", flush=True)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
