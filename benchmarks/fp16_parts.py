"""Exploration: which rounding of the default scheme (fp16-mixed) moves the scores from float32 (issue 27), on
the CPU: the float32 stack with one kind of fp16 rounding put back at a time, on the parity fixture's requests.

    python benchmarks/fp16_parts.py --model smollm2-135m --parts all none weights inputs outputs attention

Parts: weights (every matmul weight rounded to fp16, as the GPU stores them), inputs (each matmul's activation
rounded to fp16 before the product), outputs (q/k/v and gate/up written in fp16), attention (its output written
in fp16), act (the gated activation written in fp16), head (the split head: fp16 weights, float32 activations);
`mixed` is the stack itself built with Precision.mixed(float16) on the CPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from fp8_ways import fixture_gap  # noqa: E402

from spinfc.backend import reference as ref  # noqa: E402
from spinfc.runtime.load.loader import load_model  # noqa: E402
from spinfc.runtime.load.precision import Precision  # noqa: E402
from spinfc.runtime.models.base import Model  # noqa: E402

H = torch.float16


def r(x):
    return x.to(H).float()


def emulated(model_name: str, parts: set[str]):
    model = load_model(model_name, precision=Precision.uniform(torch.float32))
    head = {id(model.lm_head)}
    last = model.layers[-1]
    head |= {id(last[k]) for k in ("o", "gate", "up", "down")}
    outputs = {id(w[k]) for w in model.layers[:-1] for k in ("q", "k", "v", "gate", "up")}
    if "weights" in parts or "head" in parts:
        for w in model.layers:
            for k in ("q", "k", "v", "o", "gate", "up", "down"):
                if ("weights" in parts and id(w[k]) not in head) or ("head" in parts and id(w[k]) in head):
                    w[k].copy_(r(w[k]))
        if "head" in parts:
            model.lm_head = r(model.lm_head)
    rounded_inputs = "inputs" in parts
    rounded_outputs = "outputs" in parts

    def linear(x, weight, out_dtype=None):
        body = id(weight) not in head and weight is not model.lm_head
        if rounded_inputs and body:
            x = r(x)
        y = F.linear(x, weight)
        if rounded_outputs and id(weight) in outputs:
            y = r(y)
        return y

    model.linear = linear
    ops = type("Ops", (), {})()
    for name in dir(ref):
        if not name.startswith("_"):
            setattr(ops, name, getattr(ref, name))
    if "attention" in parts:
        ops.tree_attention = lambda *a, **k: r(ref.tree_attention(*a, **k))
    if "act" in parts:
        ops.gated_act = lambda *a, **k: r(ref.gated_act(*a, **k))
    if "rope" in parts:  # q and k written in fp16 after the rotary embedding
        ops.apply_rope = lambda *a, **k: r(ref.apply_rope(*a, **k))
    if "norm" in parts:  # the norms write the next matmul's input in fp16 (subsumed by inputs)
        ops.add_rms_norm = lambda *a, **k: (lambda n, s: (r(n), s))(*ref.add_rms_norm(*a, **k))
    model.ops = ops
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--parts", nargs="+", default=["mixed", "all"])
    parser.add_argument("--fixture", action="store_true", help="also the parity fixture (slower)")
    args = parser.parse_args()
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.quant.calibrate import read_texts, sequences_of
    from spinfc.runtime.quant.sensitivity import scored_launch

    texts = read_texts(ROOT / "fixtures" / "calibration.jsonl")[::6]
    launches = [scored_launch(s) for s in sequences_of(load_tokenizer(args.model), texts)]
    float32 = load_model(args.model, precision=Precision.uniform(torch.float32))
    with torch.inference_mode():
        reference = torch.cat([float32.forward(x) for x in launches])
    every = {"weights", "inputs", "outputs", "attention", "act", "head"}
    for part in args.parts:
        if part == "mixed":
            model = load_model(args.model, precision=Precision.mixed(H))
        elif part == "mixed-rope32":  # the stack itself, its q and k kept float32 from the rotary embedding on
            model = load_model(args.model, precision=Precision.mixed(H))
            ops = type("Ops", (), {k: staticmethod(getattr(ref, k)) for k in dir(ref) if not k.startswith("_")})()
            ops.apply_rope = lambda x, *a, **k: ref.apply_rope(x.float(), *a, **k)
            model.ops = ops
        elif part == "mixed-head32":  # the stack itself, the head's weights float32 (no split products)
            model = load_model(args.model, precision=Precision(H, torch.float32, torch.float32))
        else:
            chosen = every if part == "all" else set() if part == "none" else \
                every - {part[1:]} if part.startswith("-") else set(part.split("+"))
            model = emulated(args.model, chosen)
        with torch.inference_mode():
            d = (torch.cat([model.forward(x) for x in launches]) - reference).abs()
        print(part, f"texts: max {float(d.max()):.4f} mean {float(d.mean()):.5f}",
              fixture_gap(model) if args.fixture else "", flush=True)


if __name__ == "__main__":
    main()
