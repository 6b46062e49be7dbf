"""Issue 11's two measurements in one run on one H200: (i) the seed-shaped job at Llama-3-8B shape in bf16,
fp8-static (inputs quantized inside the norm and activation kernels, and in a separate pass, to compare) and
int8-static; (ii) the packaged SmolLM2 served on CUDA (the default scheme, and fp8/int8 checkpoints written by
`spinfc quantize` with and without smoothing) against float32 on the CPU of the same weights, on the parity
fixture's requests (held out from the calibration texts).

    python -m benchmarks.gpu_precision --gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf --tokenizer .carry/tok
    python -m benchmarks.gpu_precision --smoke     # the job section's code on the CPU, tiny shapes (interpreter)
    # issue 11's time bound: bf16 vs the default fp16-mixed job, and the default's served precision
    python -m benchmarks.gpu_precision --skip rates --job-schemes bf16 fp16-mixed --served default

Sections (each runs on its own; one that fails prints its traceback and the others still run):
  rates      bf16 / fp8 / int8 TFLOP/s (the floors)
  job        per scheme: seconds, questions/s, share of its floor, reversed order and content c0 alone bit-identical,
             and the start-up row-invariance check (every GEMM of the first and last layers at the launch's rows)
  precision  per scheme served on CUDA (the default fp16-mixed, bf16-mixed, fp8/int8 checkpoints; `--served`
             picks them): max |logprob|, |p|, |floor_p| difference to float32 on the CPU
The report gives each job scheme's time over bf16's (issue 11: the default scheme within 1.05).
Results: a table last on stdout, $OUT/gpu_precision.json after every section. Imports: torch, triton,
transformers, compressed-tensors (and what spinfc's engine needs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--gguf", default=None, help="the packaged SmolLM2 GGUF file (default: the embedded model's)")
ARGS.add_argument("--tokenizer", default=None, help="SmolLM2's tokenizer folder (else converted from the GGUF)")
ARGS.add_argument("--reps", type=int, default=3, help="timed repetitions of the packed job (median)")
ARGS.add_argument("--skip", nargs="*", default=[], choices=["rates", "job", "precision"], help="sections to skip")
ARGS.add_argument("--job-schemes", nargs="*", default=None, metavar="NAME",
                  help="the job section's schemes (default: bf16, fp8-static fused and separate, int8-static); "
                  "names as benchmarks/quant_parts.py parses them, e.g. bf16-mixed fp16-mixed")
ARGS.add_argument("--served", nargs="*", default=None,
                  choices=["default", "bf16-mixed", "fp8-static", "fp8-static-smoothed", "int8-static"],
                  help="the precision section's schemes (default: all)")
ARGS.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the job section's code")
OPTIONS = ARGS.parse_args([])  # main() parses the command line

import torch

from benchmarks.harness.smoke import interpreted

RESULTS: dict = {"errors": {}, "sections": {}}
STARTED = time.perf_counter()
# (label, scheme of quant_parts, inputs quantized in a separate pass)
JOB_SCHEMES = (("bf16", "bf16", False), ("fp8-static", "fp8-static", False),
               ("fp8-static (separate quantize pass)", "fp8-static", True), ("int8-static", "int8-static", False))
# key -> (label, spinfc quantize scheme or None for the float weights, smoothing strength, --dtype)
SERVED = {"default": ("default (fp16-mixed)", None, 0.0, None),
          "bf16-mixed": ("bf16-mixed (--dtype bfloat16)", None, 0.0, "bfloat16"),
          "fp8-static": ("fp8-static, not smoothed", "fp8-static", 0.0, None),
          "fp8-static-smoothed": ("fp8-static, smoothed 0.5", "fp8-static", 0.5, None),
          "int8-static": ("int8-static, not smoothed", "int8-static", 0.0, None)}
TIME_BOUND = 1.05  # issue 11: the default scheme's job at most 5% over uniform bf16's


def save() -> None:
    out = os.environ.get("OUT")
    if out:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, "gpu_precision.json").write_text(json.dumps(RESULTS, indent=1, default=str))
        except OSError as error:
            print(f"!! could not write {out}/gpu_precision.json: {error}", flush=True)


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


def model_name() -> str:
    """The SmolLM2 weights as a model name: the GGUF path given (its tokenizer placed where spinfc's registry
    looks for the GGUF's converted tokenizer), or the embedded model."""
    if not OPTIONS.gguf:
        return "smollm2-135m"
    import hashlib

    from spinfc import registry

    gguf = Path(OPTIONS.gguf).resolve()
    name = str(gguf)
    if OPTIONS.tokenizer:  # the cache entry `registry.load_tokenizer` reads for this file
        source, stat = registry.resolve(name), gguf.stat()
        digest = hashlib.sha256(f"{gguf}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
        cached = registry.cache_dir() / "tokenizers" / f"{source.name.replace('/', '--')}-{digest}"
        if not (cached / "tokenizer_config.json").is_file():
            shutil.copytree(OPTIONS.tokenizer, cached, dirs_exist_ok=True)
    return name


def job_section(device: str) -> None:
    from benchmarks.quant_job import JobBench

    bench = JobBench(device, OPTIONS.smoke)
    RESULTS["job"] = bench.info
    print(bench.info, flush=True)
    schemes = RESULTS.setdefault("schemes", {})
    chosen = [(name, name, False) for name in OPTIONS.job_schemes] if OPTIONS.job_schemes else JOB_SCHEMES
    for label, name, separate in chosen:
        with section(f"job: {label}"):
            schemes[label] = "did not finish"
            schemes[label] = bench.scheme(name, OPTIONS.reps, separate_quantize=separate)
            print(label, {k: v for k, v in schemes[label].items() if k != "all"}, flush=True)


def precision_section(device: str) -> None:
    from benchmarks.quant_gap import CALIBRATION, gap

    from spinfc.runtime.parity import read_json, run_fixture
    from spinfc.runtime.quant import quantize_model

    name = model_name()
    fixture = ROOT / "fixtures" / "parity" / "support-and-news.json"
    began = time.perf_counter()
    reference = run_fixture(read_json(fixture, "fixture"), model=name, device="cpu", dtype="float32",
                            base=fixture.parent)
    print(f"float32 CPU reference: {len(reference['results'])} options, {time.perf_counter() - began:.0f} s",
          flush=True)
    served = RESULTS.setdefault("served", {})
    for key in OPTIONS.served if OPTIONS.served is not None else SERVED:
        label, scheme, alpha, dtype = SERVED[key]
        with section(f"precision: {label}"):
            served[label] = "did not finish"
            if scheme is None:
                served[label] = gap(name, reference, device, dtype)
            else:
                with tempfile.TemporaryDirectory(prefix="spinfc-precision-") as directory:
                    # calibrated on the GPU in float32 (the reference ops): the CPU's would take minutes here
                    quantize_model(name, scheme, CALIBRATION, Path(directory), smoothing=alpha, device=device)
                    served[label] = gap(directory, reference, device)
            print(label, served[label], flush=True)


def over_bf16(schemes: dict) -> None:
    """Each job scheme's seconds over uniform bf16's (`over_bf16`), where bf16 ran."""
    bf16 = schemes.get("bf16")
    if not isinstance(bf16, dict):
        return
    for row in schemes.values():
        if isinstance(row, dict) and "seconds" in row:
            row["over_bf16"] = row["seconds"] / bf16["seconds"]


def table() -> str:
    lines = ["", "| job scheme | seconds | over bf16 | questions/s | of its floor (TFLOP/s) | "
             "reversed / alone bit-identical | start-up row check |", "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    bf16 = RESULTS.get("schemes", {}).get("bf16")
    for label, row in RESULTS.get("schemes", {}).items():
        if not isinstance(row, dict):
            lines.append(f"| {label} | FAILED: {row} | | | | | |")
            continue
        floor = f"{row['of_floor']:.1%} ({row['floor_rate_tflops']:.0f})" if "of_floor" in row else "-"
        over = f"{row['over_bf16']:.3f}" if "over_bf16" in row else "-"
        lines.append(f"| {label} | {row['seconds']:.3f} | {over} | {row['questions_per_s']:,.0f} | {floor} | "
                     f"{row['reversed_order_all_equal']} / {row['c0_alone_equal']} | "
                     f"{row.get('start_up_row_invariance', '-')} |")
    default = RESULTS.get("schemes", {}).get("fp16-mixed")
    if isinstance(bf16, dict) and isinstance(default, dict):
        verdict = "within" if default["over_bf16"] <= TIME_BOUND else "OVER"
        lines.append(f"fp16-mixed / bf16 job time: {default['over_bf16']:.3f} ({verdict} issue 11's {TIME_BOUND})")
    lines += ["", "| SmolLM2 served on CUDA | fingerprint | max abs logprob | p | floor_p |",
              "| --- | --- | ---: | ---: | ---: |"]
    for label, row in RESULTS.get("served", {}).items():
        if not isinstance(row, dict):
            lines.append(f"| {label} | FAILED: {row} | | | |")
            continue
        lines.append(f"| {label} | {row['fingerprint']} | {row['logprob']} | {row['p']} | {row['floor_p']} |")
    lines.append(f"rates (TFLOP/s): {RESULTS.get('rates')}")
    if RESULTS["errors"]:
        lines.append("failed sections: " + "; ".join(f"{k}: {v}" for k, v in RESULTS["errors"].items()))
    lines.append(f"total {time.perf_counter() - STARTED:.0f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    global OPTIONS
    OPTIONS = ARGS.parse_args(argv)
    if OPTIONS.smoke:
        interpreted("benchmarks.gpu_precision", argv)
    from benchmarks.harness.stacks import LLAMA3_8B
    from benchmarks.quant_job import floors_of
    from benchmarks.quant_parts import matmul_rates

    device = "cpu" if OPTIONS.smoke else "cuda"
    RESULTS["environment"] = {"torch": torch.__version__,
                              "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (smoke)"}
    print(json.dumps(RESULTS["environment"]), flush=True)
    if not OPTIONS.smoke and "rates" not in OPTIONS.skip:
        with section("rates"):
            RESULTS["rates"] = matmul_rates(device, LLAMA3_8B)
            print(RESULTS["rates"], flush=True)
    if "job" not in OPTIONS.skip:
        with section("job"):
            job_section(device)
    if not OPTIONS.smoke and "precision" not in OPTIONS.skip:
        with section("precision"):
            precision_section(device)
    with section("report"):
        floors_of(RESULTS.get("job"), RESULTS.get("rates", {}), RESULTS.get("schemes", {}))
        over_bf16(RESULTS.get("schemes", {}))
        print(table(), flush=True)
    broken = [f"{label} {check}" for label, row in RESULTS.get("schemes", {}).items() if isinstance(row, dict)
              for check in ("reversed_order_all_equal", "c0_alone_equal") if row.get(check) is False]
    if broken:
        print(f"!! BATCH INVARIANCE FAILED: {'; '.join(broken)}", flush=True)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
