"""W8A8 schemes on the CPU (the dequantized reference): scales by compressed-tensors' arithmetic, deterministic
calibration, and a quantized checkpoint that compressed-tensors parses and decompresses and spinfc loads back to
the same scores as the in-memory quantized model."""

from __future__ import annotations

import json

import pytest
import torch

from spinfc.runtime.load.loader import load_model
from spinfc.runtime.load.precision import Precision
from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import Calibration, input_maxima, sequence_launch
from spinfc.runtime.quant.checkpoint import quantize_state, write_checkpoint
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES
from spinfc.runtime.quant.schemes import W8A8, quantize_weight, scales_from_max
from spinfc.runtime.weights import read_snapshot

SHAPE = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=256)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """A random llama saved by transformers (a Hugging Face snapshot directory)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**SHAPE, tie_word_embeddings=False), dtype=torch.float32)
    directory = tmp_path_factory.mktemp("llama")
    model.save_pretrained(directory)
    return directory


def launches(seed: int, count: int = 4):
    g = torch.Generator().manual_seed(seed)
    return [sequence_launch(torch.randint(0, 96, (int(n),), generator=g).tolist(), "cpu")
            for n in torch.randint(8, 40, (count,), generator=g)]


def all_logprobs(model, launch):
    """log p of every vocabulary token at the launch's answer row: [V]."""
    import dataclasses

    V = model.config.vocab
    return model.forward(dataclasses.replace(launch, read_row=torch.zeros(V, dtype=torch.int64),
                                             read_token=torch.arange(V)))


@pytest.mark.parametrize("name", W8A8)
def test_scales_follow_compressed_tensors(name):
    chosen = SCHEMES[name]
    weight = torch.randn(32, 48) * torch.linspace(0.1, 3, 32)[:, None]
    q, scale = quantize_weight(weight, chosen)
    assert q.dtype == chosen.storage and scale.shape == (32,)
    range_half = 448.0 if chosen.kind == "float" else 127.5  # compressed-tensors: max |w| / ((q_max - q_min) / 2)
    torch.testing.assert_close(scale, weight.abs().amax(1) / range_half)
    error = (chosen.dequantize(q, scale[:, None]) - weight).abs().max(1).values / weight.abs().amax(1)
    assert float(error.max()) < (0.07 if chosen.kind == "float" else 0.005)


def test_int8_rounds_half_to_even_and_clamps():
    chosen = SCHEMES["int8-static"]
    q = chosen.quantize(torch.tensor([0.5, 1.5, 2.5, -0.5, 300.0, -300.0]), torch.tensor(1.0))
    assert q.tolist() == [0, 2, 2, 0, 127, -128]


def test_calibration_is_deterministic(snapshot):
    config, state = read_snapshot(snapshot)
    model = build_model(config, state, weights_hash="x", fuse=False)
    first = input_maxima(model, launches(1))
    again = input_maxima(model, launches(1))
    backwards = input_maxima(model, launches(1)[::-1])
    assert first == again == backwards
    assert len(first) == 7 * config.layers and all(v > 0 for v in first.values())
    assert scales_from_max(torch.tensor(first["model.layers.0.self_attn.q_proj.weight"]), SCHEMES["fp8-static"]) \
        .equal(scales_from_max(torch.tensor(again["model.layers.0.self_attn.q_proj.weight"]), SCHEMES["fp8-static"]))


@pytest.mark.parametrize("name", W8A8)
def test_checkpoint_round_trip(snapshot, tmp_path, name):
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationConfig
    from safetensors.torch import load_file

    config, state = read_snapshot(snapshot)
    float_model = build_model(config, state, weights_hash="x", fuse=False)
    found = Calibration(maxima=input_maxima(float_model, launches(1)), texts=4, tokens=0, source_sha256="")
    quantized = quantize_state(config, state, found, SCHEMES[name])
    hf = json.loads((snapshot / "config.json").read_text())
    write_checkpoint(tmp_path, hf, config, quantized, SCHEMES[name], found)

    # compressed-tensors reads the config, and its own compressor decompresses a layer to our dequantized weight
    written = json.loads((tmp_path / "config.json").read_text())["quantization_config"]
    parsed = QuantizationConfig.model_validate(written)
    assert parsed.format == SCHEMES[name].format and parsed.quant_method == "compressed-tensors"
    assert "lm_head" in parsed.ignore and f"model.layers.{config.layers - 1}.mlp.down_proj" in parsed.ignore
    tensors = load_file(str(tmp_path / "model.safetensors"))
    prefix = "model.layers.0.self_attn.q_proj"
    assert tensors[f"{prefix}.weight"].dtype == SCHEMES[name].storage
    if SCHEMES[name].dynamic:  # FP8_DYNAMIC: per-token scales at run time, none stored
        activations = parsed.config_groups["group_0"].input_activations
        assert f"{prefix}.input_scale" not in tensors and activations.dynamic is True and activations.strategy == "token"
    else:
        assert tensors[f"{prefix}.input_scale"].shape == (1,)
    compressor = BaseCompressor.load_from_registry(parsed.format)
    local = {k.removeprefix(prefix + "."): v for k, v in tensors.items() if k.startswith(prefix + ".")}
    theirs = compressor.decompress(local, parsed.config_groups["group_0"])["weight"]
    torch.testing.assert_close(theirs.float(), quantized[f"{prefix}.weight"].dequantize(), rtol=0, atol=0)

    # spinfc loads it (the scheme named in the fingerprint) and scores exactly as the in-memory quantized model
    loaded = load_model(str(tmp_path))
    assert loaded.scheme == name and isinstance(loaded.layers[0]["q"], QuantizedLinear)
    assert isinstance(loaded.layers[-1]["down"], torch.Tensor)  # the answer rows' layers stay in float
    in_memory = build_model(config, quantized, weights_hash="y", quant_scheme=name)
    for launch in launches(2):
        assert torch.equal(all_logprobs(loaded, launch), all_logprobs(in_memory, launch))
        gap = (all_logprobs(loaded, launch) - all_logprobs(float_model, launch)).abs().max()
        assert 0 < float(gap) < 0.5  # quantized: different, and still the same model


def test_mixed_precision_keeps_the_residual_stream_in_float32(snapshot):
    """bf16 matmuls on the CPU: the mixed policy (float32 residual, norms, answer rows, head; the head's weights in
    bf16, multiplied as split products) is closer to float32 than uniform bf16, on the same weights."""
    config, state = read_snapshot(snapshot)
    reference = build_model(config, state, weights_hash="x")
    uniform = build_model(config, state, weights_hash="x", precision=Precision.uniform(torch.bfloat16))
    mixed = build_model(config, state, weights_hash="x", precision=Precision.mixed(torch.bfloat16))
    assert mixed.lm_head.dtype == torch.bfloat16 and mixed.layers[0]["q"].dtype == torch.bfloat16
    assert mixed.layers[-1]["down"].dtype == torch.bfloat16 and mixed.layers[0]["input_norm"].dtype == torch.float32
    assert mixed.final_norm.dtype == torch.float32
    assert (uniform.scheme, mixed.scheme, reference.scheme) == ("bf16", "bf16-mixed", "float32")
    gap = lambda m: max(float((all_logprobs(m, x) - all_logprobs(reference, x)).abs().max())  # noqa: E731
                        for x in launches(3))
    assert gap(mixed) < gap(uniform)


def test_loads_a_checkpoint_in_llm_compressors_fp8_preset(snapshot, tmp_path):
    """llm-compressor's FP8 preset (per-tensor weight scales, static per-tensor input scales, scales saved in
    bfloat16), written here with compressed-tensors' own quantize(): spinfc serves it as fp8-static."""
    from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from safetensors.torch import save_file

    config, state = read_snapshot(snapshot)
    float_model = build_model(config, state, weights_hash="x", fuse=False)
    maxima = input_maxima(float_model, launches(1))
    scheme = preset_name_to_scheme("FP8", ["Linear"])
    tensors = {}
    for key, tensor in state.items():
        if key in maxima:
            stem = key.removesuffix(".weight")
            scale = (tensor.abs().max() / 448).reshape(1)
            tensors[key] = quantize(tensor, scale, None, scheme.weights, dtype=torch.float8_e4m3fn)
            tensors[f"{stem}.weight_scale"] = scale.to(torch.bfloat16)
            tensors[f"{stem}.input_scale"] = torch.tensor([maxima[key] / 448]).to(torch.bfloat16)
        else:
            tensors[key] = tensor
    save_file(tensors, str(tmp_path / "model.safetensors"))
    qconfig = QuantizationConfig(config_groups={"group_0": scheme}, format="float-quantized",
                                 quantization_status="compressed", ignore=["lm_head"])
    hf = json.loads((snapshot / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(hf, quantization_config=qconfig.model_dump(mode="json"))))
    loaded = load_model(str(tmp_path))
    assert loaded.scheme == "fp8-static" and isinstance(loaded.layers[0]["o"], QuantizedLinear)
    for launch in launches(2):
        gap = (all_logprobs(loaded, launch) - all_logprobs(float_model, launch)).abs().max()
        assert 0 < float(gap) < 0.5


def test_the_command_line_names_every_scheme():
    from spinfc.cli_quant import SCHEME_NAMES
    from spinfc.runtime.quant.schemes import SCHEMES

    assert tuple(SCHEMES) == SCHEME_NAMES


def test_a_moe_checkpoint_keeps_its_routed_experts_in_float(tmp_path):
    """Qwen3.5-MoE: the shared expert and the attention are quantized and calibrated, the routed experts (stored
    per expert in the checkpoint) stay float and are named under `ignore`; the checkpoint loads and scores close to
    the float model."""
    from tests.runtime.qwen3_5_random import random_qwen3_5

    source = tmp_path / "moe"
    random_qwen3_5(source, moe=True)
    config, state = read_snapshot(source)
    float_model = build_model(config, state, weights_hash="x", fuse=False)
    found = Calibration(maxima=input_maxima(float_model, launches(1)), texts=4, tokens=0, source_sha256="")
    quantized = quantize_state(config, state, found, SCHEMES["fp8-static"])
    assert isinstance(quantized["model.layers.0.mlp.shared_expert.gate_proj.weight"], QuantizedLinear)
    assert isinstance(quantized["model.layers.0.mlp.experts.0.gate_proj.weight"], torch.Tensor)  # as stored
    out = tmp_path / "moe-fp8"
    write_checkpoint(out, json.loads((source / "config.json").read_text()), config, quantized, SCHEMES["fp8-static"],
                     found)
    assert "re:.*mlp[.]experts[.].*" in json.loads((out / "config.json").read_text())["quantization_config"]["ignore"]
    loaded = load_model(str(out))
    assert isinstance(loaded.layers[0]["up"], QuantizedLinear) and isinstance(loaded.layers[0]["experts_down"],
                                                                               torch.Tensor)
    for launch in launches(2):
        gap = (all_logprobs(loaded, launch) - all_logprobs(float_model, launch)).abs().max()
        assert 0 < float(gap) < 0.5


# dense with a linear-attention last layer (no o_proj there), and the MoE variant with the published 3:1 pattern
QWEN3_5_VARIANTS = {"dense-recurrent-last": dict(layer_types=["linear_attention", "linear_attention",
                                                               "full_attention", "linear_attention"]),
                    "moe": dict(moe=True)}


@pytest.mark.parametrize("variant", list(QWEN3_5_VARIANTS))
def test_a_qwen3_5_checkpoint_ignores_exactly_the_linears_left_unquantized(tmp_path, variant):
    """Every Linear weight of the saved checkpoint (every 2-D weight but the embeddings, the norms and the conv) is
    either quantized (has a weight_scale) or matched by an `ignore` entry, never both and never neither: a reader
    (vLLM) of `quantization_config` quantizes what spinfc quantized and nothing else. The router, the shared
    expert's gate and the Gated DeltaNet projections are among the ignored; transformers' own Linear modules are
    all among those counted."""
    from compressed_tensors.utils.match import match_name
    from safetensors import safe_open

    from tests.runtime.qwen3_5_random import random_qwen3_5

    source = tmp_path / "source"
    model = random_qwen3_5(source, **QWEN3_5_VARIANTS[variant])
    config, state = read_snapshot(source)
    found = Calibration(maxima=input_maxima(build_model(config, state, weights_hash="x", fuse=False), launches(1)),
                        texts=4, tokens=0, source_sha256="")
    out = tmp_path / "fp8"
    write_checkpoint(out, json.loads((source / "config.json").read_text()), config,
                     quantize_state(config, state, found, SCHEMES["fp8-static"]), SCHEMES["fp8-static"], found)
    ignore = json.loads((out / "config.json").read_text())["quantization_config"]["ignore"]
    with safe_open(str(out / "model.safetensors"), "pt") as file:
        keys = set(file.keys())
        linears = {key.removesuffix(".weight") for key in keys if key.endswith(".weight")
                   and len(file.get_slice(key).get_shape()) == 2 and "norm" not in key and "embed_tokens" not in key}
    linears.add("lm_head")  # tied or not, a Linear a reader builds
    assert {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)} <= linears
    quantized = {name for name in linears if f"{name}.weight_scale" in keys}
    ignored = {name for name in linears if any(match_name(name, entry) for entry in ignore)}
    assert quantized and not quantized & ignored and quantized | ignored == linears
    full = config.linear.layers.index(False)  # the first full-attention layer: its q_proj is quantized
    assert "model.layers.0.linear_attn.in_proj_qkv" in ignored and f"model.layers.{full}.self_attn.q_proj" in quantized
    if variant == "moe":
        assert {"model.layers.0.mlp.gate", "model.layers.0.mlp.shared_expert_gate",
                "model.layers.0.mlp.experts.7.down_proj"} <= ignored
    else:  # the last layer is a linear-attention one: nothing of a self_attn.o_proj it does not have
        assert not any(".3.self_attn." in entry for entry in ignore)
