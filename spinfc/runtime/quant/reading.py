"""Reading a compressed-tensors checkpoint (spinfc's or llm-compressor's): each quantized module's tensors become
the linear layer that runs its scheme, `linear.QuantizedLinear` (W8A8) or `int4.Int4Linear` (W4A16, pack-quantized),
and every check of what spinfc can run says what it found and what to do."""

from __future__ import annotations

from pathlib import Path

import attrs
import torch

from spinfc.runtime.quant.int4 import Int4Linear
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, WeightMismatch
from spinfc.runtime.weights.folder import hf_config, model_config
from spinfc.runtime.weights.snapshot import weight_files
from spinfc.whole_files import check_safetensors

FORMATS = ("float-quantized", "int-quantized", "naive-quantized", "pack-quantized")


def is_quantized(hf: dict) -> bool:
    return (hf.get("quantization_config") or {}).get("quant_method") == "compressed-tensors"


def read_quantized(directory: Path) -> tuple[ModelConfig, dict, str | None]:
    """(config, state, scheme name) of a compressed-tensors checkpoint (spinfc's or llm-compressor's): every
    quantized linear layer a QuantizedLinear (static activation scales), or dequantized to float32 where the
    checkpoint's 8-bit layers' activations are not quantized or dynamic other than FP8_DYNAMIC's per-token fp8 (the
    scheme then says `...-dequantized`; fp8 with per-token scales is `fp8-dynamic`), or
    an `int4.Int4Linear` (pack-quantized int4 weights: W4A16). Layers under `ignore` are plain floats already."""
    from compressed_tensors.quantization import QuantizationConfig
    from pydantic import ValidationError
    from safetensors.torch import load_file

    hf = hf_config(directory)
    try:
        qconfig = QuantizationConfig.model_validate(hf["quantization_config"])
    except ValidationError as error:
        raise UnsupportedModel(f"{directory}/config.json: quantization_config is not a valid compressed-tensors "
                               f"config: {error.errors()[0]['msg']} at {error.errors()[0]['loc']}") from None
    formats = {qconfig.format} | {group.format for group in qconfig.config_groups.values()} - {None}
    if not formats <= set(FORMATS) | {"mixed-precision"}:
        raise UnsupportedModel(f"{directory}: compressed-tensors format {', '.join(sorted(formats))} is not "
                               f"supported; spinfc loads {', '.join(FORMATS)} checkpoints (8-bit W8A8, int4 W4A16)")
    if str(getattr(qconfig.quantization_status, "value", qconfig.quantization_status)) != "compressed":
        raise UnsupportedModel(f"{directory}: quantization_status is {qconfig.quantization_status}, not "
                               "compressed; save the model with its weights compressed (llm-compressor's default)")
    config = model_config(directory, hf)
    state: dict = {}
    for file in weight_files(Path(directory)):
        check_safetensors(file)  # a truncated copy: one located line, not the library's error
        state.update(load_file(str(file)))
    names = sorted({key.removesuffix(".weight_scale") for key in state if key.endswith(".weight_scale")})  # quantized
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
    if f"{module}.weight_packed" in state:
        return _int4_layer(directory, state, module, group)
    weights, inputs = group.weights, group.input_activations
    if f"{module}.weight" not in state:
        raise WeightMismatch(f"a tensor {module}.weight_scale but no {module}.weight", f"{module}.weight_scale")
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
    try:
        layer = QuantizedLinear(chosen, weight, weight_scale, input_scale if static else torch.ones(()))
    except (ValueError, RuntimeError) as error:  # a scale that does not fit its weight
        raise WeightMismatch(f"tensor '{module}.weight' and its scales do not make a quantized layer ({error})",
                             f"{module}.weight") from None
    if static:
        return layer, chosen.name
    return layer.dequantize(torch.float32), f"{chosen.name.split('-')[0]}-dequantized"


def _int4_layer(directory, state: dict, module: str, group) -> tuple:
    """A pack-quantized module's tensors (popped from `state`) as an `Int4Linear`, and its scheme's name."""
    weights, inputs = group.weights, group.input_activations
    tensors = {suffix: state.pop(f"{module}.{suffix}") for suffix in
               ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx")
               if f"{module}.{suffix}" in state}
    N, K = (int(n) for n in tensors["weight_shape"].tolist())
    strategy = str(getattr(weights.strategy, "value", weights.strategy))
    size = K if strategy == "channel" else weights.group_size
    where = f"{directory}: {module} is quantized as {weights.num_bits}-bit {strategy} (group {weights.group_size})"
    if weights.num_bits != 4 or str(getattr(weights.type, "value", weights.type)) != "int" \
            or strategy not in ("group", "channel") or inputs is not None:
        raise UnsupportedModel(f"{where}{' with quantized activations' if inputs is not None else ''}; spinfc loads "
                               "4-bit int group-wise or per-channel weights with activations unquantized (W4A16)")
    if K % 8 or not size or K % size or tuple(tensors["weight_packed"].shape) != (N, K // 8):
        raise UnsupportedModel(f"{where}: its input width {K} must be a multiple of 8 and of the group size, with "
                               f"weight_packed [{N}, {K // 8}] (got {tuple(tensors['weight_packed'].shape)})")
    order = tensors.pop("weight_g_idx", None)
    if order is not None and not torch.equal(order.long(), torch.arange(K, device=order.device) // size):
        raise UnsupportedModel(f"{where} with activation order (weight_g_idx): spinfc reads groups of consecutive "
                               "input channels; quantize with GPTQ actorder 'static' or none")
    if weights.symmetric == ("weight_zero_point" in tensors):
        raise UnsupportedModel(f"{where}: {'a symmetric' if weights.symmetric else 'an asymmetric'} config but "
                               f"{'a' if weights.symmetric else 'no'} weight_zero_point: the checkpoint is damaged")
    chosen = attrs.evolve(SCHEMES["w4a16" if weights.symmetric else "w4a16-asym"], group_size=size)
    return Int4Linear.from_checkpoint(chosen, tensors, size), chosen.name
