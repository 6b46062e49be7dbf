"""Max |difference| to float32 of W8A8 checkpoints written by `spinfc quantize`, with and without smoothing, on
the parity fixture's requests (held out: not in fixtures/calibration.jsonl).

    python -m benchmarks.quant_gap                                 # both embedded models, CPU, every combination
    python -m benchmarks.quant_gap --models smollm2-135m --schemes fp8-static --smoothing 0 0.5

Per model and smoothing strength one calibration (on the CPU, float32: `quant.calibrated`, what `spinfc quantize`
runs); each scheme's checkpoint written into a temporary directory, then the fixture
run through the engine on `--device` (the reference ops on the CPU) and compared with the float32 CPU run of the
same float weights (the shipped reference file where one matches the model, else recorded here first). Prints one
table row per combination (logprob / p / floor_p max |difference|) and writes $OUT/quant_gap.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "parity" / "support-and-news.json"
CALIBRATION = ROOT / "fixtures" / "calibration.jsonl"


def float32_reference(model: str) -> dict:
    """The float32 CPU run of `model`'s fixture: the shipped reference of an embedded model, else run here."""
    from spinfc.runtime.parity import read_json, run_fixture

    shipped = FIXTURE.with_name(f"{FIXTURE.stem}.{model}.cpu-float32.json")
    if shipped.is_file():
        return read_json(shipped, "reference")
    return run_fixture(read_json(FIXTURE, "fixture"), model=model, device="cpu", dtype="float32", base=FIXTURE.parent)


def gap(model: str, reference: dict, device: str = "cpu", dtype: str | None = None) -> dict:
    """Max |difference| per field of `model` (a name or checkpoint directory) on `device` against `reference`."""
    from spinfc.runtime.parity import compare, read_json, run_fixture

    run = run_fixture(read_json(FIXTURE, "fixture"), model=model, device=device, dtype=dtype, base=FIXTURE.parent)
    report = compare(run, reference, tolerance=float("inf"))
    if report.missing:
        raise RuntimeError(f"{len(report.missing)} rows differ between the run and the reference: {report.missing[0]}")
    return {"fingerprint": run["fingerprint"], "options": report.compared,
            **{k: round(v, 4) for k, v in report.max_diff.items()}}


def quantized_gaps(model: str, schemes, strengths, reference: dict, device: str = "cpu", calibrate_on: str = "cpu",
                   max_gaps=(None,), calibration: Path = CALIBRATION):
    """Yield (scheme, strength, max_gap, gap) for every combination: one calibration of the float model per
    strength (`quant.calibrated`), each scheme's checkpoint (with the layers a gap budget keeps in half precision,
    `quant.keep_within`) written to a temporary directory and run on `device`."""
    from spinfc.runtime.quant import SCHEMES, calibrated, keep_within, write_quantized

    for strength, config, state, found, tokenizer, served, hf in calibrated(model, calibration, strengths,
                                                                             calibrate_on):
        for scheme in schemes:
            for budget in max_gaps:
                kept = found if budget is None else keep_within(budget, SCHEMES[scheme], config, state, found,
                                                                tokenizer, calibration, served, calibrate_on)
                with tempfile.TemporaryDirectory(prefix="spinfc-quant-gap-") as directory:
                    write_quantized(Path(directory), SCHEMES[scheme], config, state, kept, tokenizer, served, hf)
                    found_gap = gap(directory, reference, device)
                chosen = kept.kept or {}
                yield scheme, strength, budget, {**found_gap, "kept": len(chosen.get("modules", ())),
                                                 "calibration_gap": chosen.get("gap")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    parser.add_argument("--schemes", nargs="+", default=["fp8-static", "int8-static"])
    parser.add_argument("--smoothing", nargs="+", type=float, default=[0.0, 0.5], help="strengths (0: none)")
    parser.add_argument("--max-gap", nargs="+", type=float, default=[None],
                        help="gap budgets (`spinfc quantize --max-gap`; default: every layer quantized)")
    parser.add_argument("--calibration", type=Path, default=CALIBRATION, help="JSONL texts (default: the fixture's)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    results = []
    print("| model | scheme | smoothing | max gap | layers kept | logprob | p | floor_p |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for model in args.models:
        reference = float32_reference(model)
        began = time.perf_counter()
        for scheme, alpha, budget, found in quantized_gaps(model, args.schemes, args.smoothing, reference, args.device,
                                                           max_gaps=args.max_gap, calibration=args.calibration):
            results.append({"model": model, "scheme": scheme, "smoothing": alpha, "max_gap": budget, **found,
                            "seconds_since_start": round(time.perf_counter() - began)})
            print(f"| {model} | {scheme} | {alpha:g} | {budget or '-'} | {found['kept']} | {found['logprob']} | "
                  f"{found['p']} | {found['floor_p']} |", flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "quant_gap.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
