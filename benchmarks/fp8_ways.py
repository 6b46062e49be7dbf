"""Exploration: which way narrows fp8-static's gap to float32 on the CPU reference (issue 27), each variant of
one calibration run on the parity fixture's held-out requests and on token logprobs of calibration texts.

    python -m benchmarks.fp8_ways --model smollm2-135m --texts 32 --ways base keep8 had

A way is built in memory (no checkpoint written); every quantized layer quantizes its input in `quantize_input`
(the producing kernels' fused quantization is the same arithmetic on the CPU).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

from spinfc.runtime.models import build_model
from spinfc.runtime.quant import float_model
from spinfc.runtime.quant.calibrate import read_texts, sequences_of
from spinfc.runtime.quant.checkpoint import is_quantized_linear, shared_maxima
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES, quantize_weight, scales_from_max

FIXTURE = ROOT / "fixtures" / "parity" / "support-and-news.json"
CALIBRATION = ROOT / "fixtures" / "calibration.jsonl"
FP8 = SCHEMES["fp8-static"]


class Rotated(QuantizedLinear):
    """A quantized layer whose input is rotated (x @ R) before it is quantized; its weight was multiplied by R."""

    rotation: torch.Tensor

    def quantize_input(self, x):
        return super().quantize_input(x.float() @ self.rotation)


def block_hadamard(n: int, block: int) -> torch.Tensor:
    """[n, n] orthogonal: block-diagonal normalized Sylvester Hadamard matrices of size `block` (n % block == 0)."""
    h = torch.ones(1, 1)
    while h.shape[0] < block:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    h = h / block**0.5
    return torch.block_diag(*[h] * (n // block))


def observe(model, launches, transforms):
    """max |x @ transforms[name]| per layer input (transforms: name -> [K, K] or absent)."""
    import copy

    from spinfc.runtime.quant.calibrate import weight_names

    names, maxima = weight_names(model), {}
    view = copy.copy(model)

    def observed(x, weight, out_dtype=None):
        name = names.get(id(weight))
        if name is not None:
            t = x.detach().float()
            if name in transforms:
                t = t @ transforms[name]
            m = float(t.abs().max())
            maxima[name] = max(maxima.get(name, 0.0), m)
        return type(model).linear(view, x, weight, out_dtype)

    view.linear = observed
    view.residual_in_matmul = False
    with torch.inference_mode():
        for launch in launches:
            view.forward(launch)
    return maxima


def seq_launch(tokens, device="cpu", last=32):
    """One causal sequence whose last `last` positions score their next token."""
    from spinfc.backend.launch import Launch

    T = len(tokens) - 1
    ids = torch.tensor(tokens[:T], dtype=torch.int64)
    start = max(0, T - last)
    rows = torch.arange(start, T)
    return Launch(tokens=ids, positions=torch.arange(T), ends=torch.full((T,), T, dtype=torch.int32),
                  spans=((0, T),), rows=rows, read_row=torch.arange(len(rows)),
                  read_token=torch.tensor(tokens[start + 1:T + 1], dtype=torch.int64))


def quantize_layer(weight, input_max, clip=None):
    q, scale = quantize_weight(weight, FP8)
    if clip:
        best_err = (FP8.dequantize(q, scale[:, None]) - weight).pow(2).sum(1)
        for c in clip:
            s = scales_from_max(weight.abs().amax(1) * c, FP8)
            qc = FP8.quantize(weight, s[:, None])
            err = (FP8.dequantize(qc, s[:, None]) - weight).pow(2).sum(1)
            better = err < best_err
            q = torch.where(better[:, None], qc, q)
            scale = torch.where(better, s, scale)
            best_err = torch.minimum(err, best_err)
    return QuantizedLinear(FP8, q, scale, scales_from_max(torch.tensor(input_max), FP8))


def variant(config, state, maxima, keep=(), rotations=None, clip=None, half=torch.float16):
    rotations = rotations or {}
    out = {}
    for key, tensor in state.items():
        if not is_quantized_linear(key, config):
            out[key] = tensor
        elif any(key in group for group in keep):
            out[key] = tensor.to(half).float()
        elif key in rotations:
            r = rotations[key]
            layer = quantize_layer(tensor @ r, maxima[key], clip)
            rl = Rotated(FP8, layer.weight, layer.weight_scale, layer.input_scale)
            rl.rotation = r
            out[key] = rl
        else:
            out[key] = quantize_layer(tensor, maxima[key], clip)
    return out


def build(config, state, served):
    model = build_model(config, state, name=served, weights_hash="way", fuse=False, device="cpu",
                        quant_scheme="fp8-static")
    model.quantize_in_kernels = False
    return model


def fixture_gap(model):
    import spinfc.runtime.parity as parity

    reference = parity.read_json(FIXTURE.with_name(f"{FIXTURE.stem}.{model.name}.cpu-float32.json"), "reference")
    run = parity.run_fixture(parity.read_json(FIXTURE, "fixture"), base=FIXTURE.parent, loaded=model)
    report = parity.compare(run, reference, tolerance=float("inf"))
    return {k: round(v, 3) for k, v in report.max_diff.items() if k != "residual"}


def text_gap(model, launches, reference):
    with torch.inference_mode():
        got = torch.cat([model.forward(launch) for launch in launches])
    d = (got - reference).abs()
    return {"mean": round(float(d.mean()), 4), "q99": round(float(d.quantile(0.99)), 3),
            "max": round(float(d.max()), 3)}


def main(argv: list[str] | None = None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--ways", nargs="+", default=["base"])
    args = parser.parse_args(argv)
    config, state, tokenizer, served, _ = float_model(args.model)
    texts = read_texts(CALIBRATION)
    calib = sequences_of(tokenizer, texts[:args.texts])
    check = [seq_launch(s) for s in sequences_of(tokenizer, texts[-16:])]  # scored texts, not calibrated on
    from spinfc.runtime.quant.calibrate import launches_of

    float_stack = build_model(config, state, name=served, weights_hash="f", fuse=False, device="cpu")
    with torch.inference_mode():
        reference = torch.cat([float_stack.forward(launch) for launch in check])
    plain = shared_maxima(observe(float_stack, launches_of(calib, "cpu"), {}))
    kinds = (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("self_attn.o_proj",),
             ("mlp.gate_proj", "mlp.up_proj"), ("mlp.down_proj",))
    groups = [tuple(f"model.layers.{i}.{n}.weight" for n in kind) for i in range(config.layers - 1) for kind in kinds]
    sensitivity = None
    for way in args.ways:
        began = time.perf_counter()
        if way == "base":
            m = build(config, variant(config, state, plain), served)
        elif way == "clip":
            m = build(config, variant(config, state, plain, clip=[0.95, 0.9, 0.85, 0.8, 0.75, 0.7]), served)
        elif way.startswith("had"):  # had<block>: online block Hadamard on the down (and o) inputs
            block = int(way[3:] or 64)
            rot = {}
            for i in range(config.layers - 1):
                rot[f"model.layers.{i}.mlp.down_proj.weight"] = block_hadamard(config.intermediate, block)
                rot[f"model.layers.{i}.self_attn.o_proj.weight"] = block_hadamard(config.heads * config.head_dim,
                                                                                  min(block, config.head_dim))
            maxima = shared_maxima(observe(float_stack, launches_of(calib, "cpu"), rot))
            m = build(config, variant(config, state, maxima, rotations=rot), served)
        elif way.startswith("keep"):  # keep<k>: the k most sensitive groups in fp16
            k = int(way[4:])
            if sensitivity is None:
                sensitivity = {}
                for g in groups:
                    others = [x for x in groups if x != g]
                    mm = build(config, variant(config, state, plain, keep=others), served)
                    sensitivity[g] = text_gap(mm, check, reference)["mean"]
                ranked = sorted(sensitivity, key=sensitivity.get, reverse=True)
                print("sensitivity:", [(r[0].removeprefix("model.layers."), sensitivity[r]) for r in ranked[:12]],
                      flush=True)
            m = build(config, variant(config, state, plain, keep=ranked[:k]), served)
        else:
            raise SystemExit(f"unknown way {way}")
        print(way, "texts", text_gap(m, check, reference), "fixture", fixture_gap(m),
              f"{time.perf_counter() - began:.0f}s", flush=True)


if __name__ == "__main__":
    main()
