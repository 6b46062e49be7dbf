"""`spinfc parity`: the comparison rules on made-up runs, and (slow) the shipped references reproduced bit for bit
on the CPU by the real command; `spinfc quantize` on SmolLM2 writes a checkpoint that serves within the measured
gap of float32."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spinfc.cli import main
from spinfc.runtime.parity import CROSS_CPU_TOLERANCE, FORMAT, compare

from packaged import load_shared

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "parity" / "support-and-news.json"


def _run(fingerprint: str, logprob: float, machine: str = "AuthenticAMD-AVX512") -> dict:
    row = {"job": "j", "input": 0, "query": "q", "values": {}, "option": " yes", "logprob": logprob, "p": 0.5,
           "floor_p": 0.5, "residual": 0.1}
    return {"format": FORMAT, "fingerprint": fingerprint, "machine": machine, "model": "m", "results": [row]}


def test_same_fingerprint_is_bit_for_bit_on_cuda_within_the_cpus_tolerance_and_another_within_its_own():
    cuda = lambda value: _run("a", value, machine="cuda")  # noqa: E731
    assert compare(cuda(-1.0), cuda(-1.0)).ok
    assert not compare(cuda(-1.0), cuda(-1.0 + 1e-12), tolerance=1.0).ok  # CUDA: bit for bit, --tolerance unused
    assert compare(_run("b", -1.0), _run("a", -1.02), tolerance=0.05).ok
    report = compare(_run("b", -1.0), _run("a", -1.2), tolerance=0.05)
    assert not report.ok and abs(report.max_diff["logprob"] - 0.2) < 1e-9 and "FAIL" in report.text()
    intel = _run("a", -1.0 + 2.2e-5, machine="GenuineIntel-AVX512")  # what an Intel CI host measured
    assert compare(intel, _run("a", -1.0)).ok and "within 0.0001" in compare(intel, _run("a", -1.0)).text()
    assert compare(_run("a", -1.0 + 1.6e-5), _run("a", -1.0)).ok  # one CPU family, another host: within it too
    assert not compare(_run("a", -1.0 + 2e-4, machine="GenuineIntel-AVX2"), _run("a", -1.0)).ok
    assert "PASS: bit-for-bit (same fingerprint; the CPU" in compare(_run("a", -1.0), _run("a", -1.0)).text()
    missing = _run("a", -1.0)
    missing["results"][0]["option"] = " no"
    assert not compare(missing, _run("a", -1.0)).ok


def test_a_reference_of_another_format_is_refused(tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps({"results": []}))
    assert main(["parity", "--fixture", str(tmp_path / "missing.json"), "--reference", str(tmp_path / "r.json")]) == 2
    assert "fixture" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_shipped_reference_is_reproduced_within_the_cpus_tolerance(model, capsys):
    reference = FIXTURE.with_name(f"support-and-news.{model}.cpu-float32.json")
    assert main(["parity", "--fixture", str(FIXTURE), "--reference", str(reference), "--model", model]) == 0
    out = capsys.readouterr().out
    # the CPU promises the stated tolerance on every host (bit-identity is CUDA's); the same bits say so
    assert "PASS: bit-for-bit (same fingerprint; the CPU" in out or f"PASS: within {CROSS_CPU_TOLERANCE:g}" in out


@pytest.mark.slow
def test_quantized_smollm2_serves_within_the_measured_gap(tmp_path, capsys):
    """fp8-static SmolLM2 on the fixture's requests (held out from calibration), not smoothed (the default): measured max |logprob gap| to float32 1.59 (p 0.141) on the CPU reference with q/k/v and gate/up
    sharing one input scale (1.82 before); 2.5 leaves room for rounding, not for a broken scheme (docs/quantization.md
    has the other schemes' and the smoothed figures)."""
    out = tmp_path / "fp8"
    assert main(["quantize", "smollm2-135m", "--scheme", "fp8-static", "-o", str(out)]) == 0  # bundled calibration
    said = capsys.readouterr().err  # progress from the first second, on a stream that is not a terminal
    for step in ("calibration: " + str(ROOT / "fixtures" / "calibration.jsonl"), "reading smollm2-135m",
                 "calibrating on 90 texts", "quantizing the linear layers"):
        assert step in said, (step, said)
    # the texts packed into launches, each counted as it runs
    assert re.search(r"calibrating \((\d+) launches of packed texts\): \1/\1, about 0 s left", said), said
    assert said.startswith("spinfc quantize [0 s]: smollm2-135m ->")
    for name in ("config.json", "model.safetensors", "recipe.yaml", "calibration.json", "tokenizer.json"):
        assert (out / name).is_file(), name
    served_with_its_base_models_name_and_packs(out)
    reference = FIXTURE.with_name("support-and-news.smollm2-135m.cpu-float32.json")
    code = main(["parity", "--fixture", str(FIXTURE), "--reference", str(reference), "--model", str(out),
                 "--tolerance", "2.5"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "fp8-static-reference-cpu" in text


def served_with_its_base_models_name_and_packs(checkpoint: Path) -> None:
    """Over HTTP: the checkpoint is served as smollm2-135m-fp8-static (its path an alias) with SmolLM2's packs."""
    from litestar.testing import TestClient

    from spinfc.config import EngineSettings, Settings
    from spinfc.server.app import create_app
    from tests.server.live import wait_ready

    settings = Settings(engine=EngineSettings(model=str(checkpoint), device="cpu", warmup="none"))
    with TestClient(create_app(settings, load_model=load_shared), timeout=600) as client:
        wait_ready(client)
        (card,) = client.get("/v1/models").json()["data"]
        assert card["id"] == "smollm2-135m-fp8-static" and str(checkpoint) in card["aliases"]
        assert client.get("/v1/models/smollm2-135m-fp8-static").json()["id"] == "smollm2-135m-fp8-static"
        packs = client.get("/v1/packs").json()
        assert "spinfc/support-triage" in [p["id"] for p in packs["data"]], packs
        body = {"model": str(checkpoint), "packs": [{"id": "spinfc/support-triage"}],
                "messages": [{"role": "user", "content": "I was charged twice, please refund one."}]}
        response = client.post("/v1/score", json=body)
        assert response.status_code == 200 and response.json()["model"] == "smollm2-135m-fp8-static", response.text


def test_a_quantized_checkpoint_keeps_its_base_models_name_and_packs(tmp_path):
    """Without a model: the folder `spinfc quantize` writes resolves to `<base>-<scheme>`, its path an alias, and
    the bundled packs of the base model are enabled for it."""
    from spinfc.config import EngineSettings, Settings
    from spinfc.packsrc import registry_from_settings
    from spinfc.registry import base_model, resolve

    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "compressed-tensors"}}))
    (tmp_path / "calibration.json").write_text(json.dumps({"scheme": "fp8-static", "source_model": "smollm2-135m"}))
    source = resolve(str(tmp_path))
    assert (source.name, source.aliases, source.directory) == ("smollm2-135m-fp8-static", (str(tmp_path),), tmp_path)
    assert base_model(str(tmp_path)) == "smollm2-135m" and base_model("gemma3-270m") == "gemma3-270m"
    registry = registry_from_settings(Settings(engine=EngineSettings(model=str(tmp_path))))
    assert "spinfc/support-triage" in registry.enabled

