"""Qwen3.5 images on the GPU, in one run: the Triton rope kernel's M-RoPE against the reference (and bit-identical to
plain rope on text rows, and its cost beside plain rope at a pass's shape), then the tiny random-weight Qwen3.5 with
its vision tower (tests/media/snapshots.py) on CUDA with the Triton ops: its tower's embeddings the same bits alone
and packed, an image content's scores the same bits alone and packed with text and other image contents, and within
1e-4 of transformers' Qwen3_5ForConditionalGeneration (float32). Exits non-zero on a failed check.

    python -m benchmarks.gpu_qwen3_5_media            # on a CUDA machine
    python -m benchmarks.gpu_qwen3_5_media --smoke    # the model checks on the CPU (the reference ops)
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import torch


FAILED: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def rope_kernel() -> None:
    """M-RoPE in the kernel at Qwen3.5-27B's full-attention shape (24 heads, 64 rotary dims, sections 11, 11, 10)."""
    from spinfc.backend import reference
    from spinfc.backend.kernels import rope

    T, H, D, sections, theta = 16384, 24, 64, (11, 11, 10), 1e7
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, H, D, device="cuda", generator=g)
    positions = torch.randint(0, 8000, (3, T), device="cuda", generator=g)
    positions[:, : T // 2] = positions[0, : T // 2]  # text rows: t = h = w
    want = reference.apply_rope(x.clone(), positions, theta, None, sections)
    got = rope.apply_rope(x.clone(), positions, theta, None, sections)
    error = (got - want).abs().max().item()
    check(error < 1e-3, f"M-RoPE kernel vs reference: max |diff| {error:.2e}")
    text = positions[0, : T // 2].contiguous()
    plain = rope.apply_rope(x[: T // 2].clone(), text, theta)
    check(torch.equal(got[: T // 2], plain), "M-RoPE kernel on text rows: the bits of the plain kernel")
    half = x.half()
    for name, run in (("plain", lambda: rope.apply_rope(half, positions[0].contiguous(), theta)),
                      ("M-RoPE", lambda: rope.apply_rope(half, positions, theta, None, sections))):
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(50):
            run()
        torch.cuda.synchronize()
        print(f"      rope {name} fp16 [{T}, {H}, {D}]: {(time.perf_counter() - start) / 50 * 1e6:.1f} us", flush=True)


def model_checks(device: str) -> None:
    import dataclasses

    from spinfc.backend import triton_ops
    from spinfc.runtime.launch.runner import Runner, SegmentArrays
    from spinfc.runtime.load.loader import load_model
    from spinfc.shapes import Shapes
    from tests.media import test_qwen3_5_parity as parity
    from tests.media.snapshots import qwen3_5_snapshot

    directory = Path(tempfile.mkdtemp()) / "qwen3_5-vision"
    theirs, tokenizer = qwen3_5_snapshot(directory)
    ops = {"ops": triton_ops} if device == "cuda" else {}
    ours = load_model(str(directory), device=device, **ops)
    shapes = Shapes(budget=2048, block=128) if device == "cuda" else Shapes(budget=1024, block=64)

    def scores(request) -> dict:
        program = parity.compiled(ours, tokenizer, request)
        runner = Runner(ours, shapes, device=device)
        got = runner.collect(runner.launch([SegmentArrays.of(segment) for segment in program.segments]))
        reads = [read for segment in program.segments for read in segment.reads]
        return program, dict(zip(((r.content, r.question, r.option, r.step) for r in reads), got))

    everything = parity.body(0)
    program, packed = scores(everything)
    if device == "cuda" and importlib.util.find_spec("fla") is not None:
        # transformers binds its gated delta rule to fla's Triton kernels where fla is installed, and those refuse
        # the CPU tensors of the float32 reference: parity is the CPU's check (tests/media/test_qwen3_5_parity.py)
        print("      parity against transformers: not run here (fla installed); the CPU tests check it", flush=True)
    else:
        want = parity.transformers_logprobs(theirs, program)
        error = max(abs(packed[key] - want[key]) for key in want)
        check(error < 1e-4, f"{device} float32 vs transformers (CPU): max |logprob diff| {error:.2e} over {len(want)}")
    alone = dict(everything, inputs=[everything["inputs"][2]])
    _, by_itself = scores(alone)
    gap = max(abs(by_itself[(0, *key[1:])] - value) for key, value in packed.items() if key[0] == 2)
    if device == "cuda":
        check(gap == 0.0, f"an image content's scores: the same bits alone and packed with text and image contents "
                          f"(max |diff| {gap:.2e})")
    else:  # the CPU promises its rounding tolerance only (a last bit may differ with the pass, as for text)
        check(gap < 1e-5, f"an image content's scores alone and packed on the CPU: max |diff| {gap:.2e}")
    reads = [piece.read for content in program.contents for piece in content.media]
    together = ours.towers.embed(reads, device)
    start, equal = 0, True
    for read in reads:
        equal &= torch.equal(ours.towers.embed([read], device), together[start:start + len(read.embedded)])
        start += len(read.embedded)
    check(equal, f"the tower's embeddings on {device}: the same bits alone and beside other images")
    text = dict(everything, inputs=[everything["inputs"][1]])
    launch, _ = Runner(ours, shapes, device=device).stage(
        [SegmentArrays.of(s) for s in parity.compiled(ours, tokenizer, text).segments])
    launch = launch.to(device)
    three = dataclasses.replace(launch, rope_positions=launch.positions[None].repeat(3, 1))
    check(torch.equal(ours.forward(launch), ours.forward(three)), "a text pass with three equal positions a row: "
          "the bits of the plain rope path")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the model checks on the CPU")
    args = parser.parse_args(argv)
    if not args.smoke:
        rope_kernel()
    model_checks("cpu" if args.smoke else "cuda")
    print("FAILED: " + "; ".join(FAILED) if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    raise SystemExit(main())
