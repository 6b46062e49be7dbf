"""Qwen3.5-27B's shape in W4A16 on one GPU, in one run (random weights; throughput and memory do not depend on
their values):

  memory     the int4 checkpoint's weights per layer kind (measured on the layers built) extrapolated to all 64
             layers, plus the embeddings and the LM head, the recurrent state per content and the K/V of a default
             pass (16,384 tokens), against 24 GB
  speed      the seed-shaped job (24 contents of 470 tokens, 56 questions of 20) through the stack's forward on
             pre-lowered passes (gpu_qwen3_5.speed_prelowered), bf16 vs fp8-static vs w4a16, scaled to 64 layers
  invariance content c0's scores bit-identical in the job, in reverse order, alone and beside other questions
             (gpu_qwen3_5.check_invariance), for the w4a16 model

The w4a16 weights are GPTQ's (`weight_only.gptq_state`, groups of 128) on Hessians from a few random sequences
through the float model; the fp8-static ones use calibrated maxima of the same run. Exits non-zero on a failed check.

    python -m benchmarks.gpu_int4 [--layers 8] [--out results.json]     # on the GPU (about 3 minutes)
    python -m benchmarks.gpu_int4 --smoke                               # a tiny model on the CPU (checks the script)

Needs, beyond torch and triton: compressed-tensors (packing), flash-linear-attention (Qwen3.5 on CUDA, as
gpu_qwen3_5.py). The candidate int4 GEMMs were compared once (int4_gemms.py, retired; benchmarks/NOTES.md,
2026-12-04): spinfc's Triton kernel was kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import attrs
import torch

from benchmarks import gpu_qwen3_5 as qwen
from benchmarks.harness import stacks

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--layers", type=int, default=8, help="the 27B's widths with this many layers (3 linear : 1 full; at "
                  "least 8, so that a full-attention layer other than the last is measured)")
ARGS.add_argument("--budget", type=int, default=16384)
ARGS.add_argument("--out", type=Path, default=None)
ARGS.add_argument("--smoke", action="store_true", help="a tiny model and job on the CPU (checks the script)")
CARD = 24e9  # bytes: "one 24 GB GPU, the whole card"


def quantized_states(c, float_state: dict, device: str) -> dict:
    """{"bf16": ..., "fp8-static": ..., "w4a16": ...} state dicts of the same float weights."""
    from spinfc.runtime.models import build_model
    from spinfc.runtime.quant.checkpoint import quantize_state
    from spinfc.runtime.quant.schemes import SCHEMES
    from spinfc.runtime.quant.calibrate import (DELTA_NET_SHORTS, LINEAR_SHORTS, Calibration, input_maxima,
                                                sequence_launch, weight_names)
    from spinfc.runtime.quant.checkpoint import is_quantized_linear
    from spinfc.runtime.quant.gptq import input_hessians
    from spinfc.runtime.quant.weight_only import gptq_state

    model = build_model(c, float_state, weights_hash="float", fuse=False, device=device)
    g = torch.Generator().manual_seed(0)
    length = 256 if device.startswith("cuda") else 24
    launches = [sequence_launch(torch.randint(0, c.vocab, (length,), generator=g).tolist(), device) for _ in range(4)]
    names = {i: k for i, k in weight_names(model, LINEAR_SHORTS + DELTA_NET_SHORTS).items()
             if is_quantized_linear(k, c, weight_only=True)}
    hessians, _ = input_hessians(model, launches, names)
    found = Calibration(maxima=input_maxima(model, launches), texts=4, tokens=4 * length, source_sha256="")
    del model
    w4 = attrs.evolve(SCHEMES["w4a16"], group_size=128 if c.hidden % 128 == 0 else 32)
    int4 = gptq_state(c, float_state, hessians, w4, device)
    del hessians
    half = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in float_state.items()}
    return {"bf16": half, "fp8-static": quantize_state(c, float_state, found, SCHEMES["fp8-static"]),
            "w4a16": {k: v if not torch.is_tensor(v) else half[k] for k, v in int4.items()}}


def layer_bytes(state: dict, index: int) -> int:
    from spinfc.runtime.models.base import _flat

    prefix = f"model.layers.{index}."
    return sum(t.numel() * t.element_size() for k, t in _flat(state).items() if k.startswith(prefix))


def memory(c, full, state: dict, budget: int) -> dict:
    """Bytes of the int4 27B at defaults: layers measured here (one linear, one full; not the last, whose answer-row
    layers stay bf16) scaled to the 27B's 48 + 16, plus the last layer's o/gate/up/down in bf16 (counted beside
    their int4 bytes: an overestimate of about 0.15 GB), embeddings and LM head in bf16, the recurrent state of the
    job's contents and one pass's K/V."""
    linear = next(i for i, kind in enumerate(c.linear.layers[:-1]) if kind)
    attention = next(i for i, kind in enumerate(c.linear.layers[:-1]) if not kind) \
        if not all(c.linear.layers[:-1]) else None
    per_linear = layer_bytes(state, linear)
    per_full = layer_bytes(state, attention) if attention is not None else per_linear
    widths = (full.hidden * full.intermediate * 3 + full.heads * full.head_dim * full.hidden) * 2  # last o + MLP
    weights = (sum(full.linear.layers) * per_linear + (full.layers - sum(full.linear.layers)) * per_full
               + widths + 2 * full.vocab * full.hidden * 2)
    kv = (full.layers - sum(full.linear.layers)) * 2 * full.kv_heads * full.head_dim * 2 * budget  # bf16
    states = qwen.state_bytes_per_content(full) * qwen.JOB["contents"]
    total = weights + kv + states
    return {"weights_gb": weights / 1e9, "kv_gb_per_pass": kv / 1e9, "state_gb_job": states / 1e9,
            "total_gb": total / 1e9, "card_gb": CARD / 1e9, "fits": total < CARD,
            "measured_layer_bytes": {"linear": per_linear, "full": per_full}}


def with_transient(found: dict, transient: int, budget: int) -> dict:
    """`memory`'s figures with a pass's transient bytes (activations, and the few layers' K/V, measured at the job's
    passes: the peak over what the model held before them), and the largest budget (a multiple of 1,024) at which
    the whole fits 24 GB, the K/V and the transient taken as growing with the budget."""
    fixed = (found["weights_gb"] + found["state_gb_job"]) * 1e9
    per_row = (found["kv_gb_per_pass"] * 1e9 + transient) / budget
    total = fixed + per_row * budget
    fits_at = int((CARD - fixed) / per_row) // 1024 * 1024 if per_row and CARD > fixed else 0
    return {**found, "transient_gb": transient / 1e9, "total_gb": total / 1e9, "fits": total < CARD,
            "fits_at_budget": fits_at}


def build(c, state: dict, scheme: str | None, device: str):
    from spinfc.backend import reference, triton_ops
    from spinfc.runtime.models import build_model
    from spinfc.runtime.load.precision import Precision

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    return build_model(c, state, ops=triton_ops if device.startswith("cuda") else reference, device=device,
                       precision=Precision.uniform(dtype), weights_hash=f"random-{scheme}", quant_scheme=scheme)


def main(argv: list[str] | None = None) -> int:
    args = ARGS.parse_args(argv)
    failures: list[str] = []
    device = "cpu" if args.smoke else "cuda:0"
    if not args.smoke and args.layers < 8:
        ARGS.error("--layers must be at least 8: the memory figures measure a full-attention layer other than the last")
    if args.smoke:
        qwen.DEVICE, args.budget = "cpu", 512
        qwen.JOB.update(qwen.SMALL_SEED)
    full = attrs.evolve(stacks.QWEN3_5_27B)
    c = qwen.tiny(512) if args.smoke else qwen.shape(args.layers, 32768)
    results: dict = {"torch": torch.__version__, "layers": c.layers,
                     "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"}
    began = time.perf_counter()
    print(f"random float weights, {c.layers} layers; calibrating and quantizing (GPTQ, fp8-static) ...", flush=True)
    states = quantized_states(c, stacks.qwen3_5_state(c, device, dtype=torch.float32), device)
    results["quantize_s"] = time.perf_counter() - began
    results["memory"] = memory(c, full, states["w4a16"], args.budget)
    scale = 64 / c.layers
    results["speed"] = {}
    for scheme in ("bf16", "fp8-static", "w4a16"):
        model = build(c, states.pop(scheme), None if scheme == "bf16" else scheme, device)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            held = torch.cuda.memory_allocated()
        measured = qwen.speed_prelowered(model, c, args.budget)
        if scheme == "w4a16":
            transient = torch.cuda.max_memory_allocated() - held if device.startswith("cuda") else 0
            results["memory"] = with_transient(results["memory"], transient, args.budget)
            print(results["memory"], flush=True)
            if not results["memory"]["fits"]:
                failures.append(f"the int4 27B needs {results['memory']['total_gb']:.1f} GB at a budget of "
                                f"{args.budget:,}, over 24 GB (it fits at {results['memory']['fits_at_budget']:,})")
        measured.pop("scores")
        seconds = measured["seconds"] * scale
        results["speed"][scheme] = {**measured, "seconds_64_layers": seconds,
                                    "questions_per_s_64_layers": qwen.job_questions() / seconds}
        print(scheme, results["speed"][scheme], flush=True)
        if scheme == "w4a16":
            # on the CPU the float32 model fails "beside other questions" in this check too (its BLAS): the smoke
            # run records the check without failing on it; on the GPU it must pass
            results["invariance"] = qwen.check_invariance(model, c, args.budget, [] if args.smoke else failures)
            print(results["invariance"], flush=True)
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    results["seconds"] = time.perf_counter() - began
    results["failures"] = failures
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print("FAILED: " + "; ".join(failures) if failures else f"ok in {results['seconds']:.0f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
