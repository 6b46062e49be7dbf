"""W4A16 (group-wise int4 weights, compressed-tensors pack-quantized) on the CPU, on tiny random Llama, Qwen3 and
Qwen3.5 snapshots: GPTQ's scales are compressed-tensors' own and it beats rounding to nearest; a checkpoint of each
scheme (symmetric, asymmetric) and group size (32, 64, 128) decompresses in compressed-tensors to exactly the
weights spinfc multiplies with, and loads back to scores within 1e-5 of the float32 model of those dequantized
weights (measured: 0) and within 1e-4 of transformers' own compressed-tensors loading of the same checkpoint
(measured: 5e-7); layers under `ignore` stay float."""

from __future__ import annotations

import dataclasses
import json

import attrs
import pytest
import torch

from spinfc.runtime.load.loader import load_model
from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import DELTA_NET_SHORTS, LINEAR_SHORTS, Calibration, sequence_launch, weight_names
from spinfc.runtime.quant.checkpoint import write_checkpoint
from spinfc.runtime.quant.checkpoint import is_quantized_linear
from spinfc.runtime.quant.gptq import gptq, group_qparams, input_hessians
from spinfc.runtime.quant.int4 import Int4Linear
from spinfc.runtime.quant.schemes import SCHEMES
from spinfc.runtime.quant.weight_only import gptq_state
from spinfc.runtime.weights import read_snapshot

SHAPE = dict(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, max_position_embeddings=256)
SCORE_TOLERANCE = 1e-5  # int4 model vs the float32 model of its dequantized weights (the same products on the CPU)
TRANSFORMERS_TOLERANCE = 1e-4  # vs transformers' compressed-tensors loading (its own float32 forward)


def launches(seed: int, count: int = 4):
    g = torch.Generator().manual_seed(seed)
    return [sequence_launch(torch.randint(0, 96, (int(n),), generator=g).tolist(), "cpu")
            for n in torch.randint(8, 40, (count,), generator=g)]


def all_logprobs(model, launch):
    V = model.config.vocab
    return model.forward(dataclasses.replace(launch, read_row=torch.zeros(V, dtype=torch.int64),
                                             read_token=torch.arange(V)))


def saved(directory, family: str):
    import transformers

    torch.manual_seed(0)
    kind = {"llama": "Llama", "qwen3": "Qwen3"}[family]
    config = getattr(transformers, f"{kind}Config")(**SHAPE, tie_word_embeddings=False)
    transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(directory)
    return directory


class Source:
    """A float snapshot, its stack and the Hessians of its linear inputs over a few random sequences."""

    def __init__(self, directory):
        self.directory = directory
        self.config, self.state = read_snapshot(directory)
        self.model = build_model(self.config, self.state, weights_hash="x", fuse=False)
        names = {i: k for i, k in weight_names(self.model, LINEAR_SHORTS + DELTA_NET_SHORTS).items()
                 if is_quantized_linear(k, self.config, weight_only=True)}
        self.hessians, self.maxima = input_hessians(self.model, launches(1), names)

    def checkpoint(self, out, name: str, group: int, kept: tuple[str, ...] = ()):
        chosen = attrs.evolve(SCHEMES[name], group_size=group)
        state = gptq_state(self.config, self.state, self.hessians, chosen)
        for module in kept:  # kept in float (and named under `ignore`)
            state[f"{module}.weight"] = self.state[f"{module}.weight"]
        found = Calibration(maxima=self.maxima, texts=4, tokens=0, source_sha256="",
                            kept={"modules": list(kept)} if kept else None)
        write_checkpoint(out, json.loads((self.directory / "config.json").read_text()), self.config, state, chosen,
                         found)
        return state


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return Source(saved(tmp_path_factory.mktemp("llama"), "llama"))


def transformers_logprobs(directory, launch):
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import CompressedTensorsConfig

    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                 quantization_config=CompressedTensorsConfig(run_compressed=False))
    with torch.no_grad():
        return torch.log_softmax(model(launch.tokens[None]).logits[0, -1].float(), -1), model


@pytest.mark.parametrize("name", ["w4a16", "w4a16-asym"])
def test_group_scales_are_compressed_tensors_own(name):
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.utils import calculate_qparams

    chosen = attrs.evolve(SCHEMES[name], group_size=32)
    w = torch.randn(64, 32) * torch.rand(64, 1)
    w[3], w[4] = 0.0, w[4].abs()  # an all-zero group, and one with no negative value
    scale, zero = group_qparams(w, chosen)
    theirs, their_zero = calculate_qparams(w.amin(1), w.amax(1), QuantizationArgs(**chosen.args(activations=False)))
    assert torch.equal(scale, theirs.float())
    assert zero is None if chosen.symmetric else torch.equal(zero, their_zero.float())


@pytest.mark.parametrize("name", ["w4a16", "w4a16-asym"])
def test_gptq_beats_rounding_to_nearest_on_the_calibration_inputs(name):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 128, generator=g) @ torch.randn(128, 128, generator=g)  # correlated input channels
    weight = torch.randn(96, 128, generator=g)
    chosen = attrs.evolve(SCHEMES[name], group_size=32)
    hessian = x.t() @ x
    q, scale, zero = gptq(weight, hessian, chosen)
    group = lambda t: t.repeat_interleave(32, dim=1)  # noqa: E731
    ours = (q.float() - (0 if zero is None else group(zero))) * group(scale)
    s, z = group_qparams(weight.reshape(96, 4, 32).reshape(384, 32), chosen)  # rounding to nearest, per group
    shifted = weight.reshape(384, 32) / s[:, None] + (0 if z is None else z[:, None])
    nearest = ((shifted.round().clamp(-8, 7) - (0 if z is None else z[:, None])) * s[:, None]).reshape(96, 128)
    error = lambda w: float((x @ (w - weight).t()).norm())  # noqa: E731
    assert q.dtype == torch.int8 and int(q.min()) >= -8 and int(q.max()) <= 7
    assert error(ours) < 0.8 * error(nearest)


@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("name", ["w4a16", "w4a16-asym"])
def test_a_checkpoint_decompresses_loads_and_scores_as_its_dequantized_weights(llama, tmp_path, name, group):
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationConfig
    from safetensors.torch import load_file

    state = llama.checkpoint(tmp_path, name, group)
    written = QuantizationConfig.model_validate(json.loads((tmp_path / "config.json").read_text())
                                                ["quantization_config"])
    assert written.format == "pack-quantized" and written.config_groups["group_0"].input_activations is None
    weights = written.config_groups["group_0"].weights
    assert (weights.num_bits, weights.group_size, weights.symmetric) == (4, group, name == "w4a16")
    tensors = load_file(str(tmp_path / "model.safetensors"))
    prefix = "model.layers.0.mlp.down_proj"
    local = {k.removeprefix(prefix + "."): v for k, v in tensors.items() if k.startswith(prefix + ".")}
    assert local["weight_packed"].shape == (128, 256 // 8) and ("weight_zero_point" in local) == (name != "w4a16")
    theirs = BaseCompressor.load_from_registry("pack-quantized").decompress(local, written.config_groups["group_0"])
    assert torch.equal(theirs["weight"].float(), state[f"{prefix}.weight"].dequantize())

    loaded = load_model(str(tmp_path))
    assert loaded.scheme == name and isinstance(loaded.layers[0]["down"], Int4Linear)
    assert isinstance(loaded.layers[-1]["down"], torch.Tensor)  # the answer rows' layers stay float
    dequantized = build_model(llama.config, {k: v.dequantize() if isinstance(v, Int4Linear) else v
                                             for k, v in state.items()}, weights_hash="d")
    for launch in launches(2, count=2):
        ours = all_logprobs(loaded, launch)
        assert float((ours - all_logprobs(dequantized, launch)).abs().max()) <= SCORE_TOLERANCE
        gap = float((ours - all_logprobs(llama.model, launch)).abs().max())
        assert 0 < gap < 0.5  # quantized: different, and still the same model
    launch = launches(3, count=1)[0]
    reference, _ = transformers_logprobs(tmp_path, launch)
    assert float((all_logprobs(loaded, launch) - reference).abs().max()) <= TRANSFORMERS_TOLERANCE


def test_layers_under_ignore_stay_float_in_spinfc_and_in_transformers(llama, tmp_path):
    kept = ("model.layers.0.mlp.down_proj", "model.layers.1.self_attn.q_proj")
    llama.checkpoint(tmp_path, "w4a16", 64, kept=kept)
    ignore = json.loads((tmp_path / "config.json").read_text())["quantization_config"]["ignore"]
    assert set(kept) <= set(ignore)
    loaded = load_model(str(tmp_path))
    assert isinstance(loaded.layers[0]["down"], torch.Tensor) and isinstance(loaded.layers[0]["up"], Int4Linear)
    assert isinstance(loaded.layers[1]["q"], torch.Tensor) and isinstance(loaded.layers[1]["k"], Int4Linear)
    fused = load_model(str(tmp_path))
    fused.fuse_projections()  # q float, k and v int4: kept as three products, gate/up fused
    assert "qkv" not in fused.layers[1] and isinstance(fused.layers[1]["gate_up"], Int4Linear)
    launch = launches(4, count=1)[0]
    assert torch.equal(all_logprobs(fused, launch), all_logprobs(loaded, launch))
    reference, theirs = transformers_logprobs(tmp_path, launch)
    assert torch.equal(theirs.model.layers[0].mlp.down_proj.weight.float(), llama.state["model.layers.0.mlp.down_proj.weight"])
    assert float((all_logprobs(loaded, launch) - reference).abs().max()) <= TRANSFORMERS_TOLERANCE


def test_a_qwen3_checkpoint_matches_transformers(tmp_path):
    source = Source(saved(tmp_path / "qwen3", "qwen3"))
    source.checkpoint(tmp_path / "int4", "w4a16-asym", 128)
    loaded = load_model(str(tmp_path / "int4"))
    assert loaded.config.family == "qwen3" and isinstance(loaded.layers[0]["q"], Int4Linear)
    launch = launches(5, count=1)[0]
    reference, _ = transformers_logprobs(tmp_path / "int4", launch)
    assert float((all_logprobs(loaded, launch) - reference).abs().max()) <= TRANSFORMERS_TOLERANCE


def test_a_qwen3_5_checkpoint_quantizes_its_delta_net_projections(tmp_path):
    """Weight-only: the Gated DeltaNet projections are int4 too (on the 27B a fifth of the weights), fused into one
    product as the float ones are; scores as the dequantized float32 model's."""
    from tests.runtime.qwen3_5_random import random_qwen3_5

    random_qwen3_5(tmp_path / "source", linear_value_head_dim=16)
    source = Source(tmp_path / "source")
    state = source.checkpoint(tmp_path / "int4", "w4a16", 32)
    ignore = json.loads((tmp_path / "int4" / "config.json").read_text())["quantization_config"]["ignore"]
    assert not any("linear_attn" in entry for entry in ignore)
    loaded = load_model(str(tmp_path / "int4"))
    assert isinstance(loaded.layers[0]["in_qkv"], Int4Linear) and isinstance(loaded.layers[0]["o"], Int4Linear)
    dequantized = build_model(source.config, {k: v.dequantize() if isinstance(v, Int4Linear) else v
                                              for k, v in state.items()}, weights_hash="d")
    fused = load_model(str(tmp_path / "int4"))
    fused.fuse_projections()
    assert isinstance(fused.layers[0]["in_all"], Int4Linear)
    for launch in launches(6, count=2):
        ours = all_logprobs(loaded, launch)
        assert float((ours - all_logprobs(dequantized, launch)).abs().max()) <= SCORE_TOLERANCE
        assert float((all_logprobs(fused, launch) - ours).abs().max()) <= SCORE_TOLERANCE
        assert 0 < float((ours - all_logprobs(source.model, launch)).abs().max()) < 0.5


def test_a_group_size_that_does_not_tile_a_width_is_refused_before_calibrating(tmp_path, capsys):
    from spinfc.cli import main

    status = main(["quantize", "smollm2-135m", "--scheme", "w4a16", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and "input width 576 is not a multiple of the group size 128: give --group-size 64" in err
    assert "calibrating" not in err and "Traceback" not in err
    status = main(["quantize", "smollm2-135m", "--scheme", "fp8-static", "--group-size", "64", "-o", str(tmp_path)])
    assert status == 2 and "--group-size applies to the int4 schemes" in capsys.readouterr().err
