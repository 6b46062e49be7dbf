"""`spinfc parity`: the comparison rules on made-up runs, and (slow) the shipped references reproduced bit for bit
on the CPU by the real command; `spinfc quantize` on SmolLM2 writes a checkpoint that serves within the measured
gap of float32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spinfc.cli import main
from spinfc.runtime.parity import FORMAT, compare

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "parity" / "support-and-news.json"


def _run(fingerprint: str, logprob: float) -> dict:
    row = {"job": "j", "input": 0, "query": "q", "values": {}, "option": " yes", "logprob": logprob, "p": 0.5,
           "floor_p": 0.5, "residual": 0.1}
    return {"format": FORMAT, "fingerprint": fingerprint, "model": "m", "results": [row]}


def test_same_fingerprint_is_bit_for_bit_and_another_is_within_tolerance():
    assert compare(_run("a", -1.0), _run("a", -1.0)).ok
    assert not compare(_run("a", -1.0), _run("a", -1.0 + 1e-12), tolerance=1.0).ok  # tolerance is not used
    assert compare(_run("b", -1.0), _run("a", -1.02), tolerance=0.05).ok
    report = compare(_run("b", -1.0), _run("a", -1.2), tolerance=0.05)
    assert not report.ok and abs(report.max_diff["logprob"] - 0.2) < 1e-9 and "FAIL" in report.text()
    missing = _run("a", -1.0)
    missing["results"][0]["option"] = " no"
    assert not compare(missing, _run("a", -1.0)).ok


def test_a_reference_of_another_format_is_refused(tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps({"results": []}))
    assert main(["parity", "--fixture", str(tmp_path / "missing.json"), "--reference", str(tmp_path / "r.json")]) == 2
    assert "fixture" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_shipped_reference_is_reproduced_bit_for_bit(model, capsys):
    reference = FIXTURE.with_name(f"support-and-news.{model}.cpu-float32.json")
    assert main(["parity", "--fixture", str(FIXTURE), "--reference", str(reference), "--model", model]) == 0
    out = capsys.readouterr().out
    assert "0 differ in any bit" in out and "PASS: bit-for-bit" in out


@pytest.mark.slow
def test_quantized_smollm2_serves_within_the_measured_gap(tmp_path, capsys):
    """fp8-static SmolLM2 on the fixture's requests (held out from calibration), not smoothed (the default): measured max |logprob gap| to float32 1.59 (p 0.141) on the CPU reference with q/k/v and gate/up
    sharing one input scale (1.82 before); 2.5 leaves room for rounding, not for a broken scheme (docs/quantization.md
    has the other schemes' and the smoothed figures)."""
    out = tmp_path / "fp8"
    assert main(["quantize", "smollm2-135m", "--scheme", "fp8-static", "--calibration",
                 str(ROOT / "fixtures" / "calibration.jsonl"), "-o", str(out)]) == 0
    for name in ("config.json", "model.safetensors", "recipe.yaml", "calibration.json", "tokenizer.json"):
        assert (out / name).is_file(), name
    reference = FIXTURE.with_name("support-and-news.smollm2-135m.cpu-float32.json")
    code = main(["parity", "--fixture", str(FIXTURE), "--reference", str(reference), "--model", str(out),
                 "--tolerance", "2.5"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "fp8-static-reference-cpu" in text
