"""Smoothing (SmoothQuant folded into the float weights) and the fused activation quantization, on the CPU
reference: smoothing leaves the float model's function unchanged and narrows the inputs' range; a quantized stack
whose norms and gated activation write the 8-bit inputs themselves scores bit for bit as one that quantizes in a
separate pass; q/k/v and gate/up share one input scale; a smoothed checkpoint records its smoothing and loads."""

from __future__ import annotations

import json

import pytest
import torch

from spinfc.runtime.load.loader import load_model
from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import Calibration, channel_maxima, input_maxima, sequence_launch
from spinfc.runtime.quant.checkpoint import quantize_state, write_checkpoint
from spinfc.runtime.quant.checkpoint import is_quantized_linear
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.linear import QuantizedInput
from spinfc.runtime.quant.schemes import SCHEMES
from spinfc.runtime.quant.schemes import W8A8
from spinfc.runtime.quant.smooth import smooth_state
from spinfc.runtime.weights import read_snapshot

SHAPE = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=256)


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def snapshot(request, tmp_path_factory):
    """A random llama or gemma3 (GQA 4:2) saved by transformers, with random norm weights and a few outlier input
    channels (large columns in the first layer's norm), as real models have."""
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(**SHAPE, tie_word_embeddings=False) if request.param == "llama" else Gemma3TextConfig(
        **SHAPE, sliding_window=6, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        query_pre_attn_scalar=24)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0 if request.param == "gemma3" else 1.0, 0.3)
                if "post_attention_layernorm" in name or "pre_feedforward" in name:
                    parameter[:3] *= 30  # outlier channels at the MLP's input
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    return directory


def launches(seed: int, count: int = 3):
    g = torch.Generator().manual_seed(seed)
    return [sequence_launch(torch.randint(0, 96, (int(n),), generator=g).tolist(), "cpu")
            for n in torch.randint(8, 40, (count,), generator=g)]


def logprobs(model, launch):
    import dataclasses

    V = model.config.vocab
    return model.forward(dataclasses.replace(launch, read_row=torch.zeros(V, dtype=torch.int64),
                                             read_token=torch.arange(V)))


def smoothed(config, state):
    model = build_model(config, state, weights_hash="x", fuse=False)
    return smooth_state(config, state, channel_maxima(model, launches(1)), 0.5,
                        lambda key: is_quantized_linear(key, config))


def test_smoothing_keeps_the_float_model_and_narrows_the_inputs(snapshot):
    config, state = read_snapshot(snapshot)
    before = build_model(config, state, weights_hash="x", fuse=False)
    new_state, summary = smoothed(config, state)
    after = build_model(config, new_state, weights_hash="y", fuse=False)
    for launch in launches(2):
        torch.testing.assert_close(logprobs(after, launch), logprobs(before, launch), atol=2e-4, rtol=0)
    assert summary["alpha"] == 0.5 and summary["largest_factor"]
    # the MLP input's per-channel spread (max over mean of the channel maxima) shrinks
    key = "model.layers.0.mlp.gate_proj.weight"
    spread = lambda m: float((lambda c: c.max() / c.mean())(channel_maxima(m, launches(1))[key]))  # noqa: E731
    assert spread(after) < spread(before) / 2
    last = f"model.layers.{config.layers - 1}.mlp.down_proj.weight"
    assert torch.equal(new_state[last], state[last])  # the answer rows' layers are not quantized: left alone


@pytest.mark.parametrize("name", [name for name in W8A8 if not SCHEMES[name].dynamic])
def test_kernels_that_write_the_quantized_input_score_as_a_separate_pass(snapshot, name):
    """Static schemes (a dynamic one's input is quantized by the layer itself: tests/runtime/test_quant_dynamic.py)."""
    config, state = read_snapshot(snapshot)
    float_model = build_model(config, state, weights_hash="x", fuse=False)
    found = Calibration(maxima=input_maxima(float_model, launches(1)), texts=3, tokens=0, source_sha256="")
    quantized = quantize_state(config, state, found, SCHEMES[name])
    fused = build_model(config, quantized, weights_hash="y", quant_scheme=name, fuse=True)
    first = fused.layers[0]
    assert isinstance(first["qkv"], QuantizedLinear) and first["q"].input_scale is first["qkv"].input_scale
    assert float(first["q"].input_scale) == float(quantized["model.layers.0.self_attn.v_proj.weight"].input_scale)
    separate = build_model(config, quantized, weights_hash="y", quant_scheme=name, fuse=True)
    separate.quantize_in_kernels = False
    for launch in launches(2):
        assert torch.equal(logprobs(fused, launch), logprobs(separate, launch))
    h = fused.norm(torch.randn(5, config.hidden), first["input_norm"], into=first["qkv"])
    assert isinstance(h, QuantizedInput) and h.data.dtype == SCHEMES[name].storage
    with pytest.raises(ValueError, match="another layer's scale"):
        first["down"](h, torch.float32)


def test_a_smoothed_checkpoint_records_it_and_loads(snapshot, tmp_path):
    import yaml

    config, state = read_snapshot(snapshot)
    new_state, summary = smoothed(config, state)
    model = build_model(config, new_state, weights_hash="x", fuse=False)
    found = Calibration(maxima=input_maxima(model, launches(1)), texts=3, tokens=0, source_sha256="",
                        smoothing=summary)
    quantized = quantize_state(config, new_state, found, SCHEMES["fp8-static"])
    hf = json.loads((snapshot / "config.json").read_text())
    write_checkpoint(tmp_path, hf, config, quantized, SCHEMES["fp8-static"], found)
    recorded = json.loads((tmp_path / "calibration.json").read_text())
    assert recorded["smoothing"]["alpha"] == 0.5
    recipe = yaml.safe_load((tmp_path / "recipe.yaml").read_text())["default_stage"]["default_modifiers"]
    assert list(recipe) == ["SmoothQuantModifier", "QuantizationModifier"]
    assert recipe["SmoothQuantModifier"]["smoothing_strength"] == 0.5
    loaded = load_model(str(tmp_path))
    assert loaded.scheme == "fp8-static"
    reference = build_model(config, state, weights_hash="z", fuse=False)
    for launch in launches(2):
        gap = (logprobs(loaded, launch) - logprobs(reference, launch)).abs().max()
        assert 0 < float(gap) < 0.5


def test_the_smoothing_flag_takes_a_strength(capsys):
    from spinfc.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["quantize", "smollm2-135m", "--calibration", "c.jsonl", "-o", "out", "--smoothing", "2"])
    assert exited.value.code == 2 and "not a smoothing strength" in capsys.readouterr().err


def test_a_gemma_config_written_for_a_checkpoint_reads_back_in_transformers():
    """`spinfc quantize gemma3-270m` writes config.json from the GGUF's metadata; transformers (the checkpoint's
    tokenizer loads through it) refuses a float query_pre_attn_scalar."""
    from transformers import AutoConfig

    from spinfc.runtime.models.families import from_hf
    from spinfc.runtime.models.gemma3 import Gemma3Config
    from spinfc.runtime.weights.hf_config import to_hf

    config = Gemma3Config(family="gemma3", hidden=64, layers=2, heads=4, kv_heads=1, head_dim=16, intermediate=96,
                         vocab=96, rope_theta=1e6, norm_eps=1e-6, tie_embeddings=True, rope_local_theta=1e4,
                         sliding_window=8, sliding_layers=(True, False), query_pre_attn_scalar=256.0)
    hf = to_hf(config)
    assert hf["query_pre_attn_scalar"] == 256 and isinstance(hf["query_pre_attn_scalar"], int)
    AutoConfig.for_model(**hf)  # raises on a float
    assert from_hf(hf).query_pre_attn_scalar == 256.0
