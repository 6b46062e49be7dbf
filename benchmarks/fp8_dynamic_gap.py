"""fp8 a user can threshold (issue 36): max and mean |difference| to float32 of fp8 schemes on the parity fixture's
held-out requests (not in fixtures/calibration.jsonl), on the CPU emulation of the GPU's numerics: every fp8
product's inputs cast to float8_e4m3fn and back with their scales, multiplied in float32 (the GPU accumulates in
another order), its output rounded to bf16 as `_scaled_mm`'s row-wise mode writes it, around the served policy
(`--around fp16-mixed`: fp16 elsewhere, float32 residual stream and head) or float32 (`--around float32`).

    python -m benchmarks.fp8_dynamic_gap                                   # both packaged models, the ways below
    python -m benchmarks.fp8_dynamic_gap --models smollm2-135m --ways dynamic dynamic-hadamard --around float32

Ways (each built in memory from the float32 weights by `quant.quantize_state`, what `spinfc quantize` writes):
    static            fp8-static: static per-tensor activation scales from a calibration run (90 texts)
    dynamic           fp8-dynamic: per-channel weight scales, per-token activation scales (FP8_DYNAMIC)
    dynamic-hadamard  fp8-dynamic with every quantized layer's input rotated by a block Hadamard matrix online
                      (x @ H, the weight W @ H quantized per channel: the same product in exact arithmetic)
    dynamic-budget    fp8-dynamic with `--max-gap 0.25` (the layer groups calibration finds most sensitive kept in
                      half precision, `quant.keep_within`)
Prints one table row per model and way; writes $OUT/fp8_dynamic_gap.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from spinfc.runtime.quant.progress import Steps

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "parity" / "support-and-news.json"
CALIBRATION = ROOT / "fixtures" / "calibration.jsonl"
FIELDS = ("logprob", "p", "floor_p")


def gaps(loaded, reference: dict) -> dict:
    """max and mean |difference| per field of the fixture run by `loaded` against the float32 `reference`."""
    from spinfc.runtime.parity import _key, read_json, run_fixture

    run = run_fixture(read_json(FIXTURE, "fixture"), base=FIXTURE.parent, loaded=loaded)
    theirs = {_key(row): row for row in reference["results"]}
    rows = [(row, theirs[_key(row)]) for row in run["results"]]
    if len(rows) != len(theirs):
        raise RuntimeError(f"the run has {len(rows)} rows, the reference {len(theirs)}")
    found = {"options": len(rows), "fingerprint": run["fingerprint"]}
    for field in FIELDS:
        d = torch.tensor([abs(a[field] - b[field]) for a, b in rows], dtype=torch.float64)
        found[f"{field}_max"], found[f"{field}_mean"] = round(float(d.max()), 4), round(float(d.mean()), 5)
    return found


def hadamard(n: int) -> torch.Tensor:
    """[n, n] orthogonal: block-diagonal normalized Sylvester Hadamard matrices, each block the largest power of two
    that divides n."""
    block = n & -n
    h = torch.ones(1, 1)
    while h.shape[0] < block:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    return torch.block_diag(*[h / block**0.5] * (n // block))


def rotated_state(config, state: dict, chosen) -> dict:
    """`state` with every quantizable linear (`is_quantized_linear`) a `Rotated` fp8 layer of W @ H."""
    from spinfc.runtime.quant.checkpoint import is_quantized_linear
    from spinfc.runtime.quant.linear import QuantizedLinear
    from spinfc.runtime.quant.schemes import quantize_weight

    class Rotated(QuantizedLinear):
        """x @ H before the per-token quantization; the weight was multiplied by H (orthogonal: the same product)."""

        rotation: torch.Tensor

        def __call__(self, x, out_dtype):
            return super().__call__(x.float() @ self.rotation, out_dtype)

    out, rotations = {}, {}
    for key, tensor in state.items():
        if not is_quantized_linear(key, config):
            out[key] = tensor
            continue
        k = tensor.shape[1]
        rotations.setdefault(k, hadamard(k))
        layer = Rotated(chosen, *quantize_weight(tensor.float() @ rotations[k], chosen), None)
        layer.rotation = rotations[k]
        out[key] = layer
    return out


def way_state(way: str, model_name: str, config, state: dict, steps) -> tuple[dict, str, dict]:
    """(the quantized state of `way`, its scheme name, what it kept) for `model_name`; `steps` (`progress.Steps`)
    hears a gap budget's measurements."""
    from spinfc.runtime.quant import SCHEMES, calibrated, keep_within, quantize_state
    from spinfc.runtime.quant.calibrate import Calibration

    dynamic = SCHEMES["fp8-dynamic"]
    nothing = Calibration(maxima={}, texts=0, tokens=0, source_sha256="")
    if way == "dynamic":
        return quantize_state(config, state, nothing, dynamic), "fp8-dynamic", {}
    if way == "dynamic-hadamard":
        return rotated_state(config, state, dynamic), "fp8-dynamic", {}
    if way in ("static", "dynamic-budget"):
        for _, config, state, found, tokenizer, served, _ in calibrated(model_name, CALIBRATION, (0.0,)):
            chosen = SCHEMES["fp8-static" if way == "static" else "fp8-dynamic"]
            if way == "dynamic-budget":
                found = keep_within(0.25, chosen, config, state, found, tokenizer, CALIBRATION, served, steps=steps)
            kept = {"kept": len((found.kept or {}).get("modules", ()))}
            return quantize_state(config, state, found, chosen), chosen.name, kept
    raise SystemExit(f"unknown way {way!r}: use static, dynamic, dynamic-hadamard or dynamic-budget")


def main(argv: list[str] | None = None) -> None:
    from spinfc.runtime.models import build_model
    from spinfc.runtime.parity import read_json
    from spinfc.runtime.load.precision import Precision
    from spinfc.runtime.quant import float_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    parser.add_argument("--ways", nargs="+", default=["dynamic", "dynamic-hadamard", "static"])
    parser.add_argument("--around", choices=("fp16-mixed", "float32"), default="fp16-mixed")
    args = parser.parse_args(argv)
    precision = Precision.mixed(torch.float16) if args.around == "fp16-mixed" else Precision.uniform(torch.float32)
    results = []
    print("| model | way | around | layers kept | logprob max | logprob mean | p max | p mean | floor_p max | s |\n"
          "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for name in args.models:
        reference = read_json(FIXTURE.with_name(f"{FIXTURE.stem}.{name}.cpu-float32.json"), "reference")
        config, state, _, served, _ = float_model(name)
        for way in args.ways:
            began = time.perf_counter()
            quantized, scheme, kept = way_state(way, name, config, state, Steps("  fp8_dynamic_gap", sys.stdout))
            model = build_model(config, quantized, name=served, weights_hash=f"{way}", fuse=False, device="cpu",
                                precision=precision, quant_scheme=scheme)
            found = {"model": name, "way": way, "around": args.around, **kept, **gaps(model, reference),
                     "seconds": round(time.perf_counter() - began)}
            results.append(found)
            print(f"| {name} | {way} | {args.around} | {found.get('kept', 0)} | {found['logprob_max']} | "
                  f"{found['logprob_mean']} | {found['p_max']} | {found['p_mean']} | {found['floor_p_max']} | "
                  f"{found['seconds']} |", flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "fp8_dynamic_gap.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
