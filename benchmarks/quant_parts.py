"""Parts of `benchmarks/gpu_quant.py`: a model per scheme on given weights (calibrated on held-out launches),
the matmul rates behind each scheme's floor, and the row-invariance check of every GEMM of the fixed launch."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.harness.timing import device_ms
from spinfc.backend import split_product, triton_ops
from spinfc.runtime.load.precision import Precision
from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import Calibration, input_maxima
from spinfc.runtime.quant.checkpoint import quantize_state
from spinfc.runtime.quant.linear import QuantizedLinear, fp8_mode
from spinfc.runtime.quant.schemes import SCHEMES as QUANT
from spinfc.runtime.quant.schemes import quantize_weight, scales_from_max

# The quantized schemes measured, with a uniform bf16 stack around them and with the mixed precision policy.
SCHEMES = ("fp8-static", "fp8-static-mixed", "int8-static", "int8-static-mixed", "fp8-dynamic", "fp8-dynamic-mixed")
ALL = ("bf16", "bf16-mixed") + SCHEMES
HALF = ("fp16", "fp16-mixed")  # float16 compute, for the default scheme's choice (not in the GEMM checks)


def parse(name: str, device: str) -> tuple[str, Precision]:
    """'fp8-static-mixed' -> ('fp8-static', Precision.mixed(bf16)); float32 on the CPU (--smoke), except fp16's
    schemes (so a smoke run goes through the mixed policy's split head)."""
    base = name.removesuffix("-mixed")
    compute = torch.float16 if base == "fp16" else \
        torch.float32 if base == "float32" or not str(device).startswith("cuda") else torch.bfloat16
    return base, Precision.mixed(compute) if name.endswith("-mixed") else Precision.uniform(compute)


def build(config, state: dict, name: str, device: str, *, ops=None, calibration=None, served_name=None):
    """A stack of scheme `name` on `state` (float weights in Hugging Face naming, on `device`); a quantized
    scheme's activation scales come from the float model's forward of the `calibration` launches; `served_name`:
    the model name its tokenizer comes from (a server's stack). `ops`: the
    Triton ops on CUDA, the reference on the CPU (--smoke checks the script's logic, not the kernels)."""
    from spinfc.backend import reference

    ops = ops or (triton_ops if str(device).startswith("cuda") else reference)
    base, precision = parse(name, device)
    if base not in QUANT:
        return build_model(config, state, ops=ops, precision=precision, device=device, weights_hash=f"random-{name}",
                           name=served_name)
    float_model = build_model(config, state, ops=ops, dtype=precision.compute, device=device, fuse=False,
                              weights_hash="calibration")
    maxima = input_maxima(float_model, [launch.to(device) for launch in calibration])
    del float_model
    found = Calibration(maxima=maxima, texts=len(calibration), tokens=0, source_sha256="random")
    quantized = quantize_state(config, state, found, QUANT[base])
    return build_model(config, quantized, ops=ops, precision=precision, device=device, quant_scheme=base,
                       weights_hash=f"random-{name}", name=served_name)


def matmul_rates(device: str, config, rows: int = 16384) -> dict:
    """TFLOP/s: an 8192^3 product in bf16, fp8 (`_scaled_mm`, per-tensor scales) and int8 (`_int_mm`); and one
    layer's four products at `rows` rows per scheme, through the path a stack runs (fp8/int8: the activation's
    quantization included)."""
    n = 8192
    a, b = torch.randn(n, n, device=device, dtype=torch.bfloat16), torch.randn(n, n, device=device,
                                                                            dtype=torch.bfloat16)
    one = torch.ones((), device=device)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    ai, bi = a.clamp(-127, 127).to(torch.int8), b.clamp(-127, 127).to(torch.int8)
    flops = 2 * n**3 / 1e9
    rates = {"bf16_square": flops / device_ms(lambda: a @ b, device),
             "fp8_square": flops / device_ms(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                                out_dtype=torch.bfloat16), device),
             "int8_square": flops / device_ms(lambda: torch._int_mm(ai, bi.t()), device),
             "fp8_scaling": fp8_mode(device)}
    del a, b, a8, b8, ai, bi
    c = config
    shapes = {"qkv": (c.hidden, (c.heads + 2 * c.kv_heads) * c.head_dim), "o": (c.heads * c.head_dim, c.hidden),
              "gate_up": (c.hidden, 2 * c.intermediate), "down": (c.intermediate, c.hidden)}
    inputs = {k: torch.randn(rows, k, device=device, dtype=torch.bfloat16) for k in {k for k, _ in shapes.values()}}
    weights = {name: torch.randn(n_out, k, device=device, dtype=torch.bfloat16) * k**-0.5
               for name, (k, n_out) in shapes.items()}
    layer_flops = sum(2 * rows * k * n_out for k, n_out in shapes.values()) / 1e9
    rates["bf16_layer"] = layer_flops / device_ms(lambda: [F.linear(inputs[w.shape[1]], w) for w in weights.values()],
                                            device)
    for scheme in ("fp8-static", "int8-static", "fp8-dynamic"):
        layers = [_quantized(w, inputs[w.shape[1]], scheme) for w in weights.values()]
        rates[f"{scheme.replace('-static', '').replace('-', '_')}_layer"] = layer_flops / device_ms(
            lambda: [layer(inputs[layer.shape[1]], torch.bfloat16) for layer in layers], device)
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in rates.items()}


def _quantized(weight: torch.Tensor, sample: torch.Tensor, scheme: str) -> QuantizedLinear:
    chosen = QUANT[scheme]
    q, scale = quantize_weight(weight, chosen)
    return QuantizedLinear(chosen, q, scale, None if chosen.dynamic else scales_from_max(sample.float().abs().amax(),
                                                                                         chosen))


def gemm_shapes(config, rows: int, answer_rows: int) -> dict[str, tuple[int, int, int, str]]:
    """label -> (M, K, N, where) of every product of the fixed launch: the four of a layer at the pass's rows
    ("rows": quantized under a W8A8 scheme), the last layer's three and the LM head at the answer rows ("answer":
    in the head's dtype)."""
    c, T, R = config, rows, answer_rows
    return {
        "qkv": (T, c.hidden, (c.heads + 2 * c.kv_heads) * c.head_dim, "rows"),
        "o": (T, c.heads * c.head_dim, c.hidden, "rows"),
        "gate_up": (T, c.hidden, 2 * c.intermediate, "rows"),
        "down": (T, c.intermediate, c.hidden, "rows"),
        "last_o": (R, c.heads * c.head_dim, c.hidden, "answer"),
        "last_gate_up": (R, c.hidden, 2 * c.intermediate, "answer"),
        "last_down": (R, c.intermediate, c.hidden, "answer"),
        "lm_head": (R, c.hidden, c.vocab, "answer"),
    }


def _product(scheme: str, where: str, label: str, K: int, N: int, device: str, sample: torch.Tensor):
    """(the product a stack of `scheme` runs for this GEMM, the dtype its input arrives in)."""
    base, precision = parse(scheme, device)
    dtype = precision.head if where == "answer" else precision.compute
    g = torch.Generator(device=device).manual_seed(K * 7 + N)
    weight = torch.randn(N, K, generator=g, device=device) * K**-0.5
    if where == "rows" and base in QUANT:
        layer = _quantized(weight, sample, base)
        return (lambda x: layer(x, precision.compute)), precision.compute
    weight = weight.to(precision.head_weights if where == "answer" else dtype)
    if label == "lm_head" and str(device).startswith("cuda"):
        from spinfc.backend.kernels.answer_head import _logits

        return (lambda x: _logits(x.to(dtype), weight)), dtype
    if split_product.is_split(torch.empty(0, dtype=dtype), weight):  # the mixed policy's head: split products
        return (lambda x: split_product.split_mm(x.to(dtype), weight)), dtype
    return (lambda x: F.linear(x.to(dtype), weight)), dtype


def row_invariance(device: str, shapes: dict, smoke: bool = False) -> dict[str, dict[str, str]]:
    """Per scheme and GEMM: "ok" when (1) rows 0, M/2 and M-1 are bit-identical after every other row changes,
    and (2) the first m rows of the product equal the product of the first m rows, for m = M/2 and the multiples
    of 128 down to 128 that a smaller pass could have; else what differed (also printed as FAILED)."""
    results: dict[str, dict[str, str]] = {}
    for scheme in ALL:
        checks = {}
        for label, (M, K, N, where) in shapes.items():
            g = torch.Generator(device=device).manual_seed(M + K + N)
            x = torch.randn(M, K, generator=g, device=device)
            fn, dtype = _product(scheme, where, label, K, N, device, x)
            x = x.to(dtype)
            base = fn(x)
            kept = torch.tensor([0, M // 2, M - 1], device=device)
            other = torch.randn(M, K, generator=g, device=device).to(dtype)
            other[kept] = x[kept]
            problems = []
            if not torch.equal(fn(other)[kept], base[kept]):
                problems.append("a row changed when the other rows changed")
            counts = sorted({m for m in (M // 2 // 128 * 128, 4096, 1024, 512, 256, 128) if 128 <= m < M})
            for m in counts:
                if not torch.equal(fn(x[:m].contiguous()), base[:m]):
                    problems.append(f"M={m} differs from M={M}")
            checks[f"{label} {M}x{K}x{N}"] = "ok" if not problems else "; ".join(problems)
            if problems:
                print(f"!! FAILED row invariance: {scheme} {label} ({M}x{K}x{N}): {'; '.join(problems)}", flush=True)
            del x, other, base
        results[scheme] = checks
    return results
