"""`spinfc quantize --scheme w4a16` on the GPU against the CPU, on a random-weight snapshot at Llama-3-8B's widths
(8 layers by default; SmolLM2's tokenizer, so a vocabulary of 49,152): each device's run of the command users run,
timed, and what differs between the two checkpoints.

  time        each device's whole command (reading, calibration on the bundled 90 texts, GPTQ, writing)
  checkpoint  per quantized layer: the int4 codes that differ (how many, by how many steps), the scales' largest
              relative difference; whether the files are the same bytes
  gptq        GPTQ alone on one Hessian (X^T X of random rows) at the widest layer (down_proj, K = 14,336) on each
              device: the same integers and scales bit for bit where GPTQ's own arithmetic is device-independent
              (runtime/quant/gptq.py); what differs in the checkpoints then comes from the calibration forward

    python -m benchmarks.gptq_device --tokenizer DIR [--layers 8] [--out results.json]   # on the GPU (~6 min)
    python -m benchmarks.gptq_device --smoke          # tiny widths, the CPU against itself (checks the script)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import attrs
import torch
from safetensors.torch import load_file

from benchmarks.harness.models import snapshot, tokenizer_folder
from spinfc.cli import main as spinfc_main
from spinfc.runtime.quant.gptq import gptq, rounded_product
from spinfc.runtime.quant.schemes import SCHEMES

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", type=Path, default=None, help="SmolLM2's tokenizer as a folder (required on the "
                  "GPU, whose machine has no packaged model; the packaged one with --smoke)")
ARGS.add_argument("--layers", type=int, default=8)
ARGS.add_argument("--device", default="cuda:0", help="the device compared with the CPU (default: cuda:0)")
ARGS.add_argument("--smoke", action="store_true", help="tiny widths, the CPU against itself")
ARGS.add_argument("--out", type=Path, default=None)


def quantize(source: Path, out: Path, device: str, group: int) -> float:
    """Seconds of `spinfc quantize SOURCE --scheme w4a16 --device DEVICE -o OUT` (its progress on stderr)."""
    started = time.perf_counter()
    status = spinfc_main(["quantize", str(source), "--scheme", "w4a16", "--group-size", str(group), "--device",
                          device, "-o", str(out)])
    if status:
        raise SystemExit(f"spinfc quantize --device {device} exited {status}")
    return time.perf_counter() - started


def codes(packed: torch.Tensor) -> torch.Tensor:
    """weight_packed [N, K / 8] int32 -> the stored 4-bit values [N, K] (0..15), lowest nibble first."""
    return torch.stack([(packed >> (4 * j)) & 0xF for j in range(8)], dim=-1).reshape(packed.shape[0], -1)


def differences(cpu: dict, other: dict) -> dict:
    """Per quantized layer: codes that differ (count, share, largest step), scales' largest relative difference."""
    layers = {}
    for key in sorted(k for k in cpu if k.endswith(".weight_packed")):
        name = key.removesuffix(".weight_packed")
        a, b = codes(cpu[key]), codes(other[key])
        apart = a != b
        scale_a, scale_b = cpu[f"{name}.weight_scale"].float(), other[f"{name}.weight_scale"].float()
        layers[name] = {"codes": a.numel(), "codes_apart": int(apart.sum()), "largest_step": int((a - b).abs().max()),
                        "scale_relative": float(((scale_a - scale_b).abs() / scale_a.abs()).max())}
    return layers


def gptq_alone(device: str, rows: int, N: int, K: int, group: int) -> dict:
    """GPTQ of one random [N, K] weight with the Hessian of `rows` random inputs, on the CPU and on `device`."""
    g = torch.Generator().manual_seed(0)
    weight, inputs = torch.randn(N, K, generator=g) * K**-0.5, torch.randn(rows, K, generator=g)
    hessian, chosen = rounded_product(inputs.t(), inputs), attrs.evolve(SCHEMES["w4a16"], group_size=group)
    found = {}
    for where in ("cpu", device):
        started = time.perf_counter()
        q, scale, _ = gptq(weight.to(where), hessian.to(where), chosen)
        found[where] = (q.cpu(), scale.cpu(), time.perf_counter() - started)  # (.cpu() waits for the device)
    (q_cpu, s_cpu, t_cpu), (q_dev, s_dev, t_dev) = found["cpu"], found[device]
    return {"shape": [N, K], "cpu_s": round(t_cpu, 2), f"{device}_s": round(t_dev, 2),
            "codes_apart": int((q_cpu != q_dev).sum()), "scales_equal": bool(torch.equal(s_cpu, s_dev))}


def run(args) -> dict:
    device, group = ("cpu", 32) if args.smoke else (args.device, 128)  # --smoke: a second CPU run for the device's
    with tempfile.TemporaryDirectory(prefix="gptq-device-") as folder:
        folder = Path(folder)
        tokenizer = args.tokenizer or tokenizer_folder("smollm2-135m", folder / "tokenizer")
        snapshot("llama-3-8b", folder / "source", tokenizer, layers=args.layers, tiny=args.smoke, device=device)
        seconds = {"cpu": quantize(folder / "source", folder / "cpu", "cpu", group),
                   f"{device} (2nd)": quantize(folder / "source", folder / "other", device, group)}
        ours, theirs = (folder / name / "model.safetensors" for name in ("cpu", "other"))
        same_bytes = ours.read_bytes() == theirs.read_bytes()
        layers = differences(load_file(str(ours)), load_file(str(theirs)))
    alone = gptq_alone(device, *((256, 32, 64) if args.smoke else (4096, 4096, 14336)), group=group)
    apart, total = (sum(v[k] for v in layers.values()) for k in ("codes_apart", "codes"))
    return {"device": device if device == "cpu" else torch.cuda.get_device_name(device), "layers": args.layers,
            "widths": "tiny" if args.smoke else "Llama-3-8B", "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "same_bytes": same_bytes, "codes_apart": apart, "share_apart": apart / total, "by_layer": layers,
            "gptq_alone": alone}


def report(found: dict) -> str:
    layers, alone = found["by_layer"].values(), found["gptq_alone"]
    return "\n".join([f"{found['device']}: spinfc quantize --scheme w4a16, {found['layers']} layers at "
                      f"{found['widths']} widths", *(f"  {k:>12}: {s:.1f} s" for k, s in found["seconds"].items()),
                      f"  checkpoints: same bytes {found['same_bytes']}; {found['codes_apart']:,} codes apart "
                      f"({found['share_apart']:.2e}), largest step {max(v['largest_step'] for v in layers)}, scales "
                      f"within {max(v['scale_relative'] for v in layers):.1e} (relative)",
                      f"  GPTQ alone on one Hessian {alone['shape']}: {alone['codes_apart']} codes apart, scales "
                      f"equal {alone['scales_equal']}"])


def main(argv: list[str] | None = None) -> int:
    args = ARGS.parse_args(argv)
    if args.tokenizer is None and not args.smoke:
        ARGS.error("--tokenizer DIR is required on the GPU (its machine has no packaged model)")
    found = run(args)
    print(report(found))
    if args.out:
        args.out.write_text(json.dumps(found, indent=1) + "\n")
    alone = found["gptq_alone"]  # past 1 in 10^5 codes, a step of GPTQ is not device-independent on this card
    return 0 if alone["codes_apart"] <= alone["shape"][0] * alone["shape"][1] * 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
