"""The gaps to float32 that issues 27 and 36 set, kept on the CPU reference on the parity fixture's news job (held
out: not in fixtures/calibration.jsonl), against the shipped float32 reference:

    fp16-mixed (the CUDA default, its roundings on the CPU)       logprob within 0.02, SmolLM2 and Gemma 3 270M
    fp8-static with `--max-gap 0.25` on 24 calibration texts      (SmolLM2) logprob within 0.4, p within 0.06: the goal (0.3,
        0.03) is not met yet; measured on the whole fixture 0.366 / 0.055 with 190 of 206 layers kept, so this
        keeps that from regressing

The CPU's float16 products and the dequantized fp8 reference round as the GPU paths do (up to float32's last
bits and the GPU's accumulation order), so a regression here is one there. Slow: it loads the packaged model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "parity" / "support-and-news.json"
JOB = "news"
pytestmark = pytest.mark.slow


def _gap(loaded, model: str) -> dict:
    from spinfc.runtime.parity import compare, read_json, run_fixture

    fixture = read_json(FIXTURE, "fixture")
    fixture = dict(fixture, jobs=[j for j in fixture["jobs"] if j["id"] == JOB])
    reference = read_json(FIXTURE.with_name(f"{FIXTURE.stem}.{model}.cpu-float32.json"), "reference")
    reference = dict(reference, results=[r for r in reference["results"] if r["job"] == JOB])
    report = compare(run_fixture(fixture, base=FIXTURE.parent, loaded=loaded), reference, tolerance=float("inf"))
    assert not report.missing and report.compared > 0
    return report.max_diff


def test_default_scheme_gap():
    """Both packaged models (issue 36: confirm Gemma 3 270M beside SmolLM2), one test so one module-level cost."""
    from spinfc.runtime.load.loader import load_model
    from spinfc.runtime.load.precision import Precision

    for model in ("smollm2-135m", "gemma3-270m"):
        found = _gap(load_model(model, precision=Precision.mixed(torch.float16)), model)
        print(f"fp16-mixed on the CPU, {model}:", found)
        assert found["logprob"] <= 0.02 and found["p"] <= 0.02, (model, found)


def test_fp8_with_a_gap_budget(tmp_path):
    from spinfc.runtime.load.loader import load_model
    from spinfc.runtime.quant.quantize import quantize_model

    texts = (ROOT / "fixtures" / "calibration.jsonl").read_text().splitlines()[:24]
    calibration = tmp_path / "calibration.jsonl"
    calibration.write_text("\n".join(texts) + "\n")
    summary = quantize_model("smollm2-135m", "fp8-static", calibration, tmp_path / "fp8", max_gap=0.25)
    kept = summary["kept_in_half"]
    assert kept["gap"] <= 0.25 and json.loads((tmp_path / "fp8" / "calibration.json").read_text())["kept_in_half"]
    found = _gap(load_model(str(tmp_path / "fp8")), "smollm2-135m")
    print(f"fp8-static, {len(kept['modules'])} layers kept in half:", found)
    assert found["logprob"] <= 0.4 and found["p"] <= 0.06, found
