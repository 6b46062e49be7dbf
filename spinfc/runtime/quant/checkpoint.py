"""Quantized checkpoints in the compressed-tensors format: what llm-compressor writes and vLLM loads.

A checkpoint directory holds:
    config.json        the model's Hugging Face config with `quantization_config` (quant_method
                       compressed-tensors, one config group targeting Linear, format float-quantized or
                       int-quantized, status compressed, the layers kept in higher precision under `ignore`)
    model.safetensors  every quantized layer as `<layer>.weight` (float8_e4m3fn or int8), `<layer>.weight_scale`
                       ([N, 1] float32) and, for a static scheme, `<layer>.input_scale` ([1] float32); everything
                       else as floats (fp8-dynamic: the activations' scales are computed per token at run time)
    recipe.yaml        the llm-compressor recipe that describes the same quantization
    calibration.json   what calibration saw: texts, tokens, the file's sha256, max |input| per layer, and the
                       smoothing applied before it (`smooth.py`), if any
    tokenizer files    the model's tokenizer (saved by transformers)

The config is written and read through the compressed-tensors package (`QuantizationConfig`), never by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from spinfc.runtime.precision import role
from spinfc.runtime.quant.calibrate import Calibration
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES, Scheme, quantize_weight, scales_from_max
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, from_hf

LINEAR_SUFFIXES = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight",
                   "up_proj.weight", "down_proj.weight")


# A MoE block's routed experts stay in the half dtype: each runs on a few rows of a pass, where an 8-bit GEMM saves
# little (and on CUDA every expert runs on every row, so its input scale would have to cover all of them)
ROUTED_EXPERTS = "re:.*mlp[.]experts[.].*"
# ... and so do its router and the shared expert's gate (one output per expert, or one: no GEMM worth 8 bits) and a
# Gated DeltaNet layer's projections (in_proj_qkv/z/a/b, out_proj): spinfc quantizes none of them (`LINEAR_SUFFIXES`)
ROUTER = "re:.*mlp[.]gate$"
SHARED_EXPERT_GATE = "re:.*mlp[.]shared_expert_gate$"
LINEAR_ATTENTION = "re:.*linear_attn[.].*"


def kept_in_float(config: ModelConfig, kept: tuple[str, ...] = ()) -> list[str]:
    """Linear modules spinfc leaves unquantized, for compressed-tensors' `ignore` (a reader quantizes every other
    Linear): the LM head and the last layer's o/gate/up/down (they run on answer rows only, so 8 bits would save
    nothing and cost precision where every score is read; no o_proj where that layer is a linear-attention one), a
    MoE block's routed experts, router and shared-expert gate, every Gated DeltaNet projection, then `kept` (the
    layers a gap budget keeps in the half dtype, `sensitivity.choose`)."""
    last = config.layers - 1
    recurrent = config.linear is not None and config.linear.layers[last]
    attention = () if recurrent else ("self_attn.o_proj",)
    mlp = ("mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj", "mlp.shared_expert.down_proj") \
        if config.experts is not None else ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    sparse = [ROUTED_EXPERTS, ROUTER, SHARED_EXPERT_GATE] if config.experts is not None else []
    linear = [LINEAR_ATTENTION] if config.linear is not None else []
    return (["lm_head"] + [f"model.layers.{last}.{name}" for name in (*attention, *mlp)] + sparse + linear
            + list(kept))


# Layers that read one input (the same norm's output): they get one input scale, the largest of theirs, so the
# producing kernel can write that input in 8 bits once for all of them (and the fused q/k/v and gate/up GEMMs of
# a CUDA stack read it as it is). vLLM does the same when it fuses them.
SHARED_INPUTS = (("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
                 ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
                 ("mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight"))


def is_quantized_linear(key: str, config: ModelConfig) -> bool:
    """Whether `spinfc quantize` quantizes this checkpoint weight (a layer's linear, not `kept_in_float`)."""
    return (key.endswith(LINEAR_SUFFIXES) and key.startswith("model.layers.") and ".mlp.experts." not in key
            and role(key, config.layers - 1) != "answer")


def shared_maxima(maxima: dict[str, float]) -> dict[str, float]:
    """`maxima` with each group of `SHARED_INPUTS` of a layer given the group's largest."""
    out = dict(maxima)
    for key in maxima:
        for names in SHARED_INPUTS:
            if key.endswith(names[0]):
                stem = key.removesuffix(names[0])
                group = [stem + n for n in names if stem + n in maxima]
                for k in group:
                    out[k] = max(maxima[g] for g in group)
    return out


def quantize_state(config: ModelConfig, state: dict[str, torch.Tensor], calibration: Calibration,
                   chosen: Scheme) -> dict:
    """The float `state` with every calibrated linear weight (but those `kept_in_float`, and those the
    calibration's gap budget keeps) as a QuantizedLinear; layers that read the same input share one input scale
    (`SHARED_INPUTS`); a dynamic scheme's layers have none (the maxima are then only a record)."""
    maxima = shared_maxima(calibration.maxima)
    kept = {f"{module}.weight" for module in calibration.kept_modules}
    out: dict = {}
    for key, tensor in state.items():
        if is_quantized_linear(key, config) and key not in kept:
            if key not in maxima and not chosen.dynamic:
                raise ValueError(f"calibration saw no input of {key}: calibrate the same model")
            weight, weight_scale = quantize_weight(tensor, chosen)
            input_scale = None if chosen.dynamic else scales_from_max(torch.tensor(maxima[key], device=tensor.device),
                                                                      chosen)
            out[key] = QuantizedLinear(chosen, weight, weight_scale, input_scale)
        else:
            out[key] = tensor
    return out


def quantization_config(config: ModelConfig, chosen: Scheme, kept: tuple[str, ...] = ()):
    """The compressed-tensors `QuantizationConfig` of a checkpoint quantized with `chosen` (`kept`: the layers a gap
    budget keeps in the half dtype, also under `ignore`)."""
    from compressed_tensors.quantization import QuantizationArgs, QuantizationConfig, QuantizationScheme

    group = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**chosen.args(activations=False)),
                               input_activations=QuantizationArgs(**chosen.args(activations=True)))
    return QuantizationConfig(config_groups={"group_0": group}, format=chosen.format,
                              quantization_status="compressed", ignore=kept_in_float(config, kept))


def recipe_yaml(config: ModelConfig, chosen: Scheme, smoothing: dict | None = None,
                kept: tuple[str, ...] = ()) -> str:
    """The llm-compressor recipe that describes this quantization: a SmoothQuantModifier first where the weights
    were smoothed, then a QuantizationModifier."""
    import yaml

    group = quantization_config(config, chosen).config_groups["group_0"]
    modifier = {"targets": ["Linear"], "ignore": kept_in_float(config, kept),
                "config_groups": {"group_0": group.model_dump(mode="json", exclude_none=True)}}
    modifiers = {}
    note = ("# written by spinfc quantize: dynamic per-token activation scales (FP8_DYNAMIC)\n" if chosen.dynamic else
            "# written by spinfc quantize: static min-max activation scales from calibration.json\n")
    if smoothing:
        modifiers["SmoothQuantModifier"] = {"smoothing_strength": smoothing["alpha"],
                                            "mappings": smoothing["mappings"], "ignore": kept_in_float(config)}
        note += ("# smoothed first (already applied to these weights); the o_proj <- v_proj mapping shares one "
                 "factor per kv head and channel across the query heads of a group\n")
    modifiers["QuantizationModifier"] = modifier
    recipe = {"default_stage": {"default_modifiers": modifiers}}
    return note + yaml.safe_dump(recipe, sort_keys=False)


def write_checkpoint(directory: Path, hf_config: dict, config: ModelConfig, state: dict, chosen: Scheme,
                     calibration: Calibration, tokenizer=None, source: str = "") -> None:
    """Write a quantized state (from `quantize_state`) and its config, recipe, calibration summary and
    tokenizer into `directory` (created; files already there are replaced)."""
    from safetensors.torch import save_file

    from spinfc import __version__
    from spinfc.runtime.models.base import _flat

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous() for k, v in _flat(state).items()}
    if config.tie_embeddings:
        tensors.pop("lm_head.weight", None)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    kept = calibration.kept_modules
    hf = dict(hf_config, quantization_config=quantization_config(config, chosen, kept).model_dump(mode="json"))
    (directory / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
    (directory / "recipe.yaml").write_text(recipe_yaml(config, chosen, calibration.smoothing, kept))
    summary = {"scheme": chosen.name, "source_model": source, "spinfc_version": __version__,
               "format": chosen.format, "kept_in_float": kept_in_float(config, kept), **calibration.summary()}
    (directory / "calibration.json").write_text(json.dumps(summary, indent=2) + "\n")
    if tokenizer is not None:
        tokenizer.save_pretrained(str(directory))


# ---- reading ---------------------------------------------------------------------------------------------------


def is_quantized(hf: dict) -> bool:
    return (hf.get("quantization_config") or {}).get("quant_method") == "compressed-tensors"


def read_quantized(directory: Path) -> tuple[ModelConfig, dict, str | None]:
    """(config, state, scheme name) of a compressed-tensors checkpoint (spinfc's or llm-compressor's): every
    quantized linear layer a QuantizedLinear (static activation scales, or fp8 with dynamic per-token ones:
    FP8_DYNAMIC), or dequantized to float32 where the checkpoint's activations are not quantized, or dynamic in
    another way (the scheme then says `...-dequantized`)."""
    from compressed_tensors.quantization import QuantizationConfig
    from pydantic import ValidationError
    from safetensors.torch import load_file

    from spinfc.runtime.weights.snapshot import weight_files

    hf = json.loads((Path(directory) / "config.json").read_text())
    try:
        qconfig = QuantizationConfig.model_validate(hf["quantization_config"])
    except ValidationError as error:
        raise UnsupportedModel(f"{directory}/config.json: quantization_config is not a valid compressed-tensors "
                               f"config: {error.errors()[0]['msg']} at {error.errors()[0]['loc']}") from None
    if qconfig.format not in ("float-quantized", "int-quantized", "naive-quantized"):
        raise UnsupportedModel(f"{directory}: compressed-tensors format {qconfig.format!r} is not supported; spinfc "
                               "loads float-quantized and int-quantized (8-bit) checkpoints")
    if str(getattr(qconfig.quantization_status, "value", qconfig.quantization_status)) != "compressed":
        raise UnsupportedModel(f"{directory}: quantization_status is {qconfig.quantization_status}, not "
                               "compressed; save the model with its weights compressed (llm-compressor's default)")
    config = from_hf(hf)
    state: dict = {}
    for file in weight_files(Path(directory)):
        state.update(load_file(str(file)))
    names = sorted({key.removesuffix(".weight_scale") for key in state if key.endswith(".weight_scale")})
    schemes = set()
    for module in names:
        group = _group_of(qconfig, module)
        layer, name = _quantized_layer(directory, state, module, group)
        schemes.add(name)
        state[f"{module}.weight"] = layer
    if len(schemes) > 1:
        raise UnsupportedModel(f"{directory}: layers use different schemes ({', '.join(sorted(schemes))}); spinfc "
                               "runs one scheme per model")
    return config, state, schemes.pop() if schemes else None


def _group_of(qconfig, module: str):
    from compressed_tensors.utils.match import match_name

    for group in qconfig.config_groups.values():
        if any(target == "Linear" or match_name(module, target) for target in group.targets):
            return group
    raise UnsupportedModel(f"{module} has a weight_scale but no config group of quantization_config targets it")


def _quantized_layer(directory, state: dict, module: str, group) -> tuple:
    weights, inputs = group.weights, group.input_activations
    weight = state.pop(f"{module}.weight")
    weight_scale = state.pop(f"{module}.weight_scale")
    input_scale = state.pop(f"{module}.input_scale", None)
    kind = str(getattr(weights.type, "value", weights.type))
    strategy = str(getattr(weights.strategy, "value", weights.strategy))
    if weights.num_bits != 8 or not weights.symmetric or strategy not in ("channel", "tensor") \
            or f"{module}.weight_zero_point" in state:
        raise UnsupportedModel(f"{directory}: {module} is quantized as {weights.num_bits}-bit {kind} {strategy} "
                               f"{'symmetric' if weights.symmetric else 'asymmetric'}; spinfc loads 8-bit symmetric "
                               "per-channel or per-tensor weights")
    chosen = SCHEMES["fp8-static" if kind == "float" else "int8-static"]
    activation = None if inputs is None else str(getattr(inputs.strategy, "value", inputs.strategy))
    static = inputs is not None and not inputs.dynamic and input_scale is not None and activation == "tensor"
    if kind == "float" and inputs is not None and inputs.dynamic is True and activation == "token" \
            and inputs.num_bits == 8 and inputs.symmetric:
        return QuantizedLinear(SCHEMES["fp8-dynamic"], weight, weight_scale, None), "fp8-dynamic"
    layer = QuantizedLinear(chosen, weight, weight_scale, input_scale if static else torch.ones(()))
    if static:
        return layer, chosen.name
    return layer.dequantize(torch.float32), f"{chosen.name.split('-')[0]}-dequantized"
