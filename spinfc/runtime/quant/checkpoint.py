"""Quantized checkpoints in the compressed-tensors format: what llm-compressor writes and vLLM loads (written here;
read by `reading.py`).

A checkpoint directory holds:
    config.json        the model's Hugging Face config with `quantization_config` (quant_method
                       compressed-tensors, one config group targeting Linear, format float-quantized,
                       int-quantized or pack-quantized, status compressed, the layers kept in higher precision
                       under `ignore`)
    model.safetensors  every W8A8 layer as `<layer>.weight` (float8_e4m3fn or int8), `<layer>.weight_scale`
                       ([N, 1] float32) and, for a static scheme, `<layer>.input_scale` ([1] float32; fp8-dynamic:
                       the activations' scales are computed per token at run time); every W4A16 layer as
                       `<layer>.weight_packed`, `.weight_scale`, `.weight_shape` (and `.weight_zero_point` where
                       asymmetric: `int4.Int4Linear`); everything else as floats
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

from spinfc import __version__
from spinfc.runtime.load.precision import role
from spinfc.runtime.models.base import _flat
from spinfc.runtime.models.families import is_recurrent
from spinfc.runtime.quant.calibrate import Calibration
from spinfc.runtime.quant.gptq import BLOCK, DAMPENING
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import Scheme, quantize_weight, scales_from_max
from spinfc.runtime.weights.config import ModelConfig

LINEAR_SUFFIXES = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight",
                   "up_proj.weight", "down_proj.weight")
# A weight-only scheme also quantizes a Gated DeltaNet layer's projections: no activation scale to calibrate, and
# on Qwen3.5-27B they are a fifth of the weights (what keeps it within a 24 GB card)
DELTA_NET_SUFFIXES = ("linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight",
                      "linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight", "linear_attn.out_proj.weight")


# A MoE block's routed experts stay in the half dtype: each runs on a few rows of a pass, where an 8-bit GEMM saves
# little (and on CUDA every expert runs on every row, so its input scale would have to cover all of them)
ROUTED_EXPERTS = "re:.*mlp[.]experts[.].*"
# ... and so do its router and the shared expert's gate (one output per expert, or one: no GEMM worth 8 bits) and a
# Gated DeltaNet layer's projections (in_proj_qkv/z/a/b, out_proj): spinfc quantizes none of them (`LINEAR_SUFFIXES`)
ROUTER = "re:.*mlp[.]gate$"
SHARED_EXPERT_GATE = "re:.*mlp[.]shared_expert_gate$"
LINEAR_ATTENTION = "re:.*linear_attn[.].*"


def kept_in_float(config: ModelConfig, kept: tuple[str, ...] = (), weight_only: bool = False) -> list[str]:
    """Linear modules spinfc leaves unquantized, for compressed-tensors' `ignore` (a reader quantizes every other
    Linear): the LM head and the last layer's o/gate/up/down (they run on answer rows only, so 8 bits would save
    nothing and cost precision where every score is read; no o_proj where that layer is a linear-attention one), a
    MoE block's routed experts, router and shared-expert gate, every Gated DeltaNet projection (unless the scheme
    is `weight_only`: then only the last layer's, which sees answer rows only), then `kept` (the layers a gap budget
    keeps in the half dtype, `sensitivity.choose`)."""
    last = config.layers - 1
    attention = () if config.is_recurrent(last) else ("self_attn.o_proj",)
    routed = getattr(config, "experts", None) is not None  # a sparse block of routed experts and a shared one
    mlp = ("mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj", "mlp.shared_expert.down_proj") \
        if routed else ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    sparse = [ROUTED_EXPERTS, ROUTER, SHARED_EXPERT_GATE] if routed else []
    linear = [LINEAR_ATTENTION] if is_recurrent(config) and not weight_only else []
    return (["lm_head"] + [f"model.layers.{last}.{name}" for name in (*attention, *mlp)] + sparse + linear
            + list(kept))


# Layers that read one input (the same norm's output): they get one input scale, the largest of theirs, so the
# producing kernel can write that input in 8 bits once for all of them (and the fused q/k/v and gate/up GEMMs of
# a CUDA stack read it as it is). vLLM does the same when it fuses them.
SHARED_INPUTS = (("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
                 ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
                 ("mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight"))


def is_quantized_linear(key: str, config: ModelConfig, weight_only: bool = False) -> bool:
    """Whether `spinfc quantize` quantizes this checkpoint weight (a layer's linear, not `kept_in_float`); a
    `weight_only` scheme also a Gated DeltaNet layer's projections (`DELTA_NET_SUFFIXES`)."""
    suffixes = LINEAR_SUFFIXES + DELTA_NET_SUFFIXES if weight_only else LINEAR_SUFFIXES
    return (key.endswith(suffixes) and key.startswith("model.layers.") and ".mlp.experts." not in key
            and not (".linear_attn." in key and not weight_only) and role(key, config.layers - 1) != "answer")


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
    (`SHARED_INPUTS`); a dynamic scheme's layers have none (the maxima are then only a record). A weight-only
    scheme is quantized by GPTQ instead (`weight_only.gptq_state`)."""
    if chosen.weight_only:
        raise ValueError(f"{chosen.name} is quantized by GPTQ (weight_only.gptq_state), not with activation scales")
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

    inputs = None if chosen.weight_only else QuantizationArgs(**chosen.args(activations=True))
    group = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**chosen.args(activations=False)),
                               input_activations=inputs, format=chosen.format)
    return QuantizationConfig(config_groups={"group_0": group}, format=chosen.format,
                              quantization_status="compressed",
                              ignore=kept_in_float(config, kept, chosen.weight_only))


def recipe_yaml(config: ModelConfig, chosen: Scheme, smoothing: dict | None = None,
                kept: tuple[str, ...] = ()) -> str:
    """The llm-compressor recipe that describes this quantization: a SmoothQuantModifier first where the weights
    were smoothed, then a QuantizationModifier."""
    import yaml

    group = quantization_config(config, chosen).config_groups["group_0"]
    modifier = {"targets": ["Linear"], "ignore": kept_in_float(config, kept, chosen.weight_only),
                "config_groups": {"group_0": group.model_dump(mode="json", exclude_none=True)}}
    if chosen.weight_only:
        note = ("# written by spinfc quantize: GPTQ on the float32 model's inputs over the calibration texts "
                "(runtime/quant/gptq.py)\n")
        modifier = {**modifier, "block_size": BLOCK, "dampening_frac": DAMPENING}
        return note + yaml.safe_dump({"default_stage": {"default_modifiers": {"GPTQModifier": modifier}}},
                                     sort_keys=False)
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
               "format": chosen.format, "kept_in_float": kept_in_float(config, kept, chosen.weight_only),
               **calibration.summary()}
    (directory / "calibration.json").write_text(json.dumps(summary, indent=2) + "\n")
    if tokenizer is not None:
        tokenizer.save_pretrained(str(directory))
