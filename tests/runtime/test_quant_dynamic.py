"""fp8-dynamic (compressed-tensors' FP8_DYNAMIC: per-channel fp8 weights, one fp8 scale per token computed from
that token's row) on the CPU reference: the same numbers as compressed-tensors' own quantization, a row's result
independent of the rows beside it, and llm-compressor's checkpoints served as this scheme, not dequantized."""

from __future__ import annotations

import json

import pytest
import torch

from spinfc.backend.kernels.quantize_reference import quantize_tokens_reference as quantize_tokens
from spinfc.runtime.load.loader import load_model
from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import Calibration
from spinfc.runtime.quant.checkpoint import quantize_state
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES
from spinfc.runtime.quant.schemes import quantize_weight
from spinfc.runtime.weights import read_snapshot
from tests.runtime.test_quant import all_logprobs, launches, snapshot  # noqa: F401  (the module's random llama)

DYNAMIC = SCHEMES["fp8-dynamic"]


def layer(n: int = 48, k: int = 64, seed: int = 0) -> tuple[QuantizedLinear, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=g) * torch.linspace(0.05, 2, n)[:, None]
    return QuantizedLinear(DYNAMIC, *quantize_weight(weight, DYNAMIC), None), weight


def test_matches_compressed_tensors_fake_quantization():
    """Per-token scales and the product agree with compressed-tensors' own arithmetic (its `calculate_qparams` on
    each token's min/max, its `fake_quantize`), bit for bit on the activations."""
    from compressed_tensors.quantization import QuantizationArgs, preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize
    from compressed_tensors.quantization.utils import calculate_qparams

    preset = preset_name_to_scheme("FP8_DYNAMIC", ["Linear"])
    assert DYNAMIC.args(activations=True) == {k: v for k, v in preset.input_activations.model_dump(mode="json").items()
                                              if k in DYNAMIC.args(activations=True)}
    linear, weight = layer()
    x = torch.randn(20, 64) * torch.logspace(-3, 3, 20)[:, None]  # rows of very different magnitude
    x[3] = 0.0  # a zero row: eps, not a division by zero
    args = QuantizationArgs(**preset.input_activations.model_dump())
    theirs_scale, zp = calculate_qparams(x.amin(1, keepdim=True), x.amax(1, keepdim=True), args)
    q, scale = quantize_tokens(x, DYNAMIC)
    assert torch.equal(scale, theirs_scale.float())
    theirs = fake_quantize(x, theirs_scale, zp, args)
    assert torch.equal(DYNAMIC.dequantize(q, scale), theirs)
    w_args = QuantizationArgs(**preset.weights.model_dump())
    w_scale, w_zp = calculate_qparams(weight.amin(1, keepdim=True), weight.amax(1, keepdim=True), w_args)
    expected = torch.nn.functional.linear(theirs, fake_quantize(weight, w_scale, w_zp, w_args))
    torch.testing.assert_close(linear(x, torch.float32), expected, rtol=1e-6, atol=1e-6)


def test_a_rows_result_does_not_depend_on_its_neighbours():
    """The scale is computed from the row alone: a row's 8-bit values, scale and output are the same bits whatever
    the other rows of the pass hold (here scaled by 1e4, or zero), where a per-tensor dynamic scale would not be."""
    linear, _ = layer()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 64, generator=g)
    others = [torch.randn(32, 64, generator=g) * 1e4, torch.zeros(32, 64)]
    rows = torch.tensor([0, 7, 31])
    out, (q, scale) = linear(x, torch.float32), quantize_tokens(x, DYNAMIC)
    for fill in others:
        mixed = fill.clone()
        mixed[rows] = x[rows]
        q2, scale2 = quantize_tokens(mixed, DYNAMIC)
        assert torch.equal(q2[rows].view(torch.uint8), q[rows].view(torch.uint8)) and torch.equal(scale2[rows],
                                                                                                  scale[rows])
        assert torch.equal(linear(mixed, torch.float32)[rows], out[rows])
    per_tensor = x.abs().amax() / 448  # the contrast: one scale for the pass moves when a neighbour does
    assert not torch.equal(per_tensor, others[0].abs().amax() / 448)


def test_fused_projections_keep_per_token_scales(snapshot):  # noqa: F811
    """q/k/v and gate/up fused into one layer score as the separate layers do (no input scale to share), and no
    norm or activation kernel is asked to write a dynamic layer's input."""
    config, state = read_snapshot(snapshot)
    found = Calibration(maxima={}, texts=0, tokens=0, source_sha256="")
    quantized = quantize_state(config, state, found, DYNAMIC)
    separate = build_model(config, quantized, weights_hash="d", fuse=False, quant_scheme="fp8-dynamic")
    fused = build_model(config, quantized, weights_hash="d", fuse=True, quant_scheme="fp8-dynamic")
    assert fused.layers[0]["qkv"].input_scale is None and fused.quantized_reader(fused.layers[0]["down"]) is None
    assert separate.scheme == "fp8-dynamic"
    for launch in launches(3):
        torch.testing.assert_close(all_logprobs(fused, launch), all_logprobs(separate, launch), rtol=0, atol=1e-5)


def test_serves_llm_compressors_fp8_dynamic_checkpoint(snapshot, tmp_path):  # noqa: F811
    """A checkpoint in llm-compressor's FP8_DYNAMIC preset, its weights quantized by compressed-tensors' own
    `quantize`: spinfc serves it as fp8-dynamic (not dequantized), scoring as the same weights quantized in memory."""
    from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from safetensors.torch import save_file

    config, state = read_snapshot(snapshot)
    preset = preset_name_to_scheme("FP8_DYNAMIC", ["Linear"])
    tensors = {}
    for key, tensor in state.items():
        if key.endswith("proj.weight") and key.startswith("model.layers."):
            stem = key.removesuffix(".weight")
            scale = (tensor.abs().amax(1, keepdim=True) / 448).to(torch.bfloat16)  # [N, 1], as llm-compressor saves
            tensors[key] = quantize(tensor, scale.float(), None, preset.weights, dtype=torch.float8_e4m3fn)
            tensors[f"{stem}.weight_scale"] = scale
        else:
            tensors[key] = tensor
    save_file(tensors, str(tmp_path / "model.safetensors"))
    qconfig = QuantizationConfig(config_groups={"group_0": preset}, format="float-quantized",
                                 quantization_status="compressed", ignore=["lm_head"])
    hf = json.loads((snapshot / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(hf, quantization_config=qconfig.model_dump(mode="json"))))
    loaded = load_model(str(tmp_path))
    assert loaded.scheme == "fp8-dynamic" and isinstance(loaded.layers[0]["o"], QuantizedLinear)
    assert loaded.layers[0]["o"].input_scale is None and isinstance(loaded.layers[-1]["down"], torch.Tensor)
    in_memory = {k: QuantizedLinear(DYNAMIC, v, tensors[k.removesuffix("weight") + "weight_scale"], None)
                 if k.endswith("proj.weight") and k.startswith("model.layers.") else v
                 for k, v in tensors.items() if not k.endswith("weight_scale")}  # the answer rows' dequantized by build
    expected = build_model(config, in_memory, weights_hash="m", quant_scheme="fp8-dynamic")
    float_model = build_model(config, state, weights_hash="x", fuse=False)
    for launch in launches(2):
        assert torch.equal(all_logprobs(loaded, launch), all_logprobs(expected, launch))
        gap = (all_logprobs(loaded, launch) - all_logprobs(float_model, launch)).abs().max()
        assert 0 < float(gap) < 0.5


@pytest.mark.parametrize("dynamic", [True, False])
def test_a_layer_refuses_the_wrong_kind_of_input_scale(dynamic):
    linear, weight = layer()
    chosen = DYNAMIC if dynamic else SCHEMES["fp8-static"]
    with pytest.raises(ValueError, match="input scale|input's scale"):
        QuantizedLinear(chosen, linear.weight, linear.weight_scale, torch.tensor(0.1) if dynamic else None)
