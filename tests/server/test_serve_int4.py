"""`spinfc quantize SNAPSHOT --scheme w4a16 -o OUT` (GPTQ on the bundled calibration set) then `spinfc serve OUT`, on
a random-weight Llama snapshot with a real tokenizer (SmolLM2's): the checkpoint is compressed-tensors'
pack-quantized format, and the server answers the seed README's example request with the int4 scheme in its
fingerprint."""

from __future__ import annotations

import json

import httpx
import pytest
import torch

from spinfc.cli import main
from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app

from .live import live_server
from .test_serve_qwen3_5 import README

pytestmark = pytest.mark.slow  # a packaged tokenizer, 90 calibration texts and a live server


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    from transformers import AutoModelForCausalLM, LlamaConfig

    from spinfc.registry import load_tokenizer

    directory = tmp_path_factory.mktemp("llama-int4-source")
    tokenizer = load_tokenizer("smollm2-135m")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
                         tie_word_embeddings=False)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_quantize_to_w4a16_then_serve_the_readme_request(snapshot, tmp_path, capsys):
    out = tmp_path / "int4"
    assert main(["quantize", str(snapshot), "--scheme", "w4a16", "-o", str(out)]) == 0
    said = capsys.readouterr()
    assert "calibrating on 90 texts" in said.err and "GPTQ" in said.err and "w4a16" in said.out
    qconfig = json.loads((out / "config.json").read_text())["quantization_config"]
    assert qconfig["format"] == "pack-quantized" and qconfig["config_groups"]["group_0"]["weights"]["num_bits"] == 4
    assert "GPTQModifier" in (out / "recipe.yaml").read_text()
    settings = Settings(engine=EngineSettings(model=str(out), device="cpu", token_budget=512, warmup="short"))
    with live_server(create_app(settings)) as url:
        response = httpx.post(f"{url}/v1/score", json=README, timeout=300)
        assert response.status_code == 200, response.text
        body = response.json()
        assert "-w4a16-" in body["system_fingerprint"], body["system_fingerprint"]
        results = {r["id"]: r["combinations"][0] for r in body["results"]}
        assert list(results) == ["topic", "refund", "month"]
        for query in ("topic", "refund"):
            assert abs(sum(o["p"] for o in results[query]["options"]) - 1) < 1e-6
        assert "answers" in results["month"]  # random weights: the extraction may find none above its floor
