"""Media on the GPU: the seed-shaped job (24 contents of ~470 tokens, 56 two-option questions) with one 896 x 896
image per content, on random weights of a Gemma 4 shape with its vision tower, through the path the server runs
(frontend parts -> read-media -> segments -> the runner's packed passes, Triton ops, each launch size replayed from
its CUDA graph: a pass holding media from its media graph, the towers run before it), beside the same image job with
media passes run eagerly (how they ran before). Prints questions/s, the
tower's share of the time, and checks batch invariance (a content's scores alone and packed with text-only and
image contents are bit-identical) and that the image reached the scores. Exits non-zero on a failed check.

    python -m benchmarks.gpu_media                 # Gemma 4 31B-like text stack (60 layers) + the vision tower
    python -m benchmarks.gpu_media --layers 12     # fewer layers (memory, time), same widths
    python -m benchmarks.gpu_media --smoke         # tiny shapes on the CPU (what CI can run)

The 31B-like shape is Gemma 4 31B's published widths as this script assumes them (hidden 5376, 32 heads, 16 KV
heads of 256 on sliding layers, 4 of 512 on full ones, k = v there, MLP 21504, window 1024, 5 sliding : 1 full);
the vision tower is transformers' Gemma4VisionConfig default. Random weights: throughput does not depend on them.
"""

from __future__ import annotations

import argparse
import base64
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from spinfc import compiler
from spinfc.config import CUDA_TOKEN_BUDGET
from spinfc.frontend import program_from_request
from spinfc.media import MediaPolicy
from spinfc.passes import PassContext
from spinfc.passes.layout import used_rows
from spinfc.runtime.models import build_model
from spinfc.runtime.load.precision import Precision
from spinfc.runtime.launch.runner import Runner, SegmentArrays
from spinfc.runtime.models.families import from_hf
from spinfc.runtime.towers import TOWER_PREFIXES, MediaReader, towers_of
from spinfc.shapes import Shapes
from tests.media.snapshots import SPECIALS, byte_tokenizer

S, F = "sliding_attention", "full_attention"


def text_config(layers: int, smoke: bool) -> dict:
    if smoke:
        return dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=layers, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
                    attention_k_eq_v=True, hidden_size_per_layer_input=0, sliding_window=64,
                    layer_types=[F if (i + 1) % 6 == 0 else S for i in range(layers)],
                    use_bidirectional_attention="vision", final_logit_softcapping=30.0)
    return dict(vocab_size=262_144, hidden_size=5376, intermediate_size=21504, num_hidden_layers=layers,
                num_attention_heads=32, num_key_value_heads=16, head_dim=256, global_head_dim=512,
                num_global_key_value_heads=4, attention_k_eq_v=True, hidden_size_per_layer_input=0,
                sliding_window=1024, layer_types=[F if (i + 1) % 6 == 0 else S for i in range(layers)],
                use_bidirectional_attention="vision", final_logit_softcapping=30.0, max_position_embeddings=131_072,
                rope_parameters={S: {"rope_type": "default", "rope_theta": 10_000.0},
                                 F: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                     "rope_theta": 1_000_000.0}})


def random_model(args, tokenizer, device: str, precision: Precision):
    """spinfc's Gemma 4 stack and towers on random weights made on the device (no checkpoint on disk)."""
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIALS}
    vision = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=16, patch_size=4, position_embedding_size=256) if args.smoke else {}
    config = Gemma4Config(text_config=text_config(args.layers, args.smoke), vision_config=vision,
                          boi_token_id=ids["<start_of_image>"], eoi_token_id=ids["<end_of_image>"],
                          image_token_id=ids["<image_soft_token>"], video_token_id=ids["<video_soft_token>"])
    with torch.device("meta"):
        shapes = {k: (v.shape, v.dtype) for k, v in Gemma4ForConditionalGeneration(config).state_dict().items()}
    g = torch.Generator(device=device).manual_seed(0)
    state, last = {}, args.layers - 1
    for name, (shape, kind) in shapes.items():
        if name.startswith(TOWER_PREFIXES):
            dtype = precision.compute
        else:  # the text stack's weights in the dtype the served precision keeps each in
            dtype = precision.dtype_of(name.replace("model.language_model.", "model."), last)
        if not kind.is_floating_point:
            state[name] = torch.zeros(shape, dtype=kind, device=device)
        elif "norm" in name or name.endswith("layer_scalar"):
            state[name] = 1 + 0.1 * torch.randn(shape, generator=g, device=device, dtype=dtype)
        else:  # made in the run's dtype: the 31B shape in float32 would not fit beside its half-precision copy
            state[name] = 0.02 * torch.randn(shape, generator=g, device=device, dtype=dtype)
    hf = config.to_dict()
    towers = towers_of(hf, state, None, device=device, dtype=precision.compute)
    ops = None
    if device.startswith("cuda"):
        from spinfc.backend import triton_ops as ops
    model = build_model(from_hf(hf), state, ops=ops, weights_hash="random", precision=Precision.uniform(dtype),
                        device=device)
    model.towers = towers
    return model


def png(side: int, seed: int) -> str:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def job(contents: int, questions: int, side: int, images: bool, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    words = ["the", "order", "arrived", "late", "and", "the", "box", "was", "damaged", "refund", "please"]
    inputs = []
    for i in range(contents):
        text = " ".join(rng.choice(words, 200))[:470]  # the byte tokenizer: ~470 tokens
        parts = [{"type": "text", "text": text}]
        if images == "all" or (images and i % 2 == 0):  # every content, or every other (text mixed in)
            parts.insert(0, {"type": "image_url", "image_url": {"url": png(side, seed * 1000 + i)}})
        inputs.append({"messages": [{"role": "user", "content": parts}]})
    queries = [{"id": f"q{k}", "template": f"\nQuestion {k}: is the box damaged in way {k}? Answer:<?>",
                "options": [" yes", " no"]} for k in range(questions)]
    return {"inputs": inputs, "scoring": {"queries": queries}}


def compiled(body: dict, ctx: PassContext):
    program = compiler.compile(program_from_request(body, model="gemma4"), ctx, until="segment")
    return program, [SegmentArrays.of(segment) for segment in program.segments]


def run(runner: Runner, arrays: list, shapes: Shapes) -> list[np.ndarray]:
    """Every segment scored, packed in order into passes of the budget; per segment its logprobs."""
    out, batch = [], []

    def flush():
        if batch:
            got = runner.collect(runner.launch(batch))
            n = 0
            for a in batch:
                out.append(got[n:n + len(a.read_row)])
                n += len(a.read_row)
            batch.clear()

    for a in arrays:
        if used_rows([len(b.tokens) for b in batch + [a]], shapes.block) > shapes.budget:
            flush()
        batch.append(a)
    flush()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument("--layers", type=int, default=None, help="text layers (default 60; --smoke 6)")
    parser.add_argument("--contents", type=int, default=24)
    parser.add_argument("--questions", type=int, default=56)
    parser.add_argument("--image", type=int, default=896, help="image side in pixels")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", choices=("fp16-mixed", "bf16", "float32"), default=None,
                        help="the text stack's (default: fp16-mixed, the served default on CUDA; --smoke float32)")
    args = parser.parse_args(argv)
    args.layers = args.layers or (6 if args.smoke else 60)
    device = "cpu" if args.smoke else "cuda:0"
    precision = {"fp16-mixed": Precision.mixed(torch.float16), "bf16": Precision.uniform(torch.bfloat16),
                 "float32": Precision.uniform(torch.float32)}[args.precision or ("float32" if args.smoke else
                                                                                 "fp16-mixed")]
    tokenizer = byte_tokenizer(Path(tempfile.mkdtemp()))
    print(f"building a Gemma 4 {'tiny' if args.smoke else '31B-like'} model, {args.layers} layers, on {device} ...",
          flush=True)
    model = random_model(args, tokenizer, device, precision)
    shapes = Shapes(budget=8192, block=64) if args.smoke else Shapes.for_device(device, CUDA_TOKEN_BUDGET, 128, 4)
    ctx = PassContext(tokenizer=tokenizer, shapes=shapes, media=MediaReader(model.towers, MediaPolicy(), tokenizer))
    tower_seconds = [0.0]
    embed = model.towers.embed

    def timed_embed(reads, device):
        sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
        sync()
        started = time.perf_counter()
        out = embed(reads, device)
        sync()
        tower_seconds[0] += time.perf_counter() - started
        return out

    model.towers.embed = timed_embed
    eager = Runner(model, shapes, device)  # every pass on the plain stack (how media passes ran before graphs)
    runner = eager
    if device.startswith("cuda"):  # as the server runs it: each launch size (and its media variant) a CUDA graph
        from spinfc.backend import serving

        graphed, shapes = serving.graph_model(model, shapes)
        runner = Runner(graphed, shapes, device)
    failed, rows = [], []
    cases = [("text only", False, runner), ("an image a content", "all", runner)]
    if runner is not eager:
        cases.append(("an image, eager", "all", eager))
    for label, images, runner in cases:
        started = time.perf_counter()
        program, arrays = compiled(job(args.contents, args.questions, args.image, images), ctx)
        compile_seconds = time.perf_counter() - started
        run(runner, arrays, shapes)  # warm-up (Triton compiles)
        tower_seconds[0], started = 0.0, time.perf_counter()
        for _ in range(args.repeats):
            run(runner, arrays, shapes)
        seconds = (time.perf_counter() - started) / args.repeats
        questions = args.contents * args.questions
        rows.append((label, program.stat("content_tokens") // args.contents, questions / seconds,
                     tower_seconds[0] / args.repeats / seconds, compile_seconds))
        print(f"  {label}: {questions / seconds:,.0f} questions/s", flush=True)
    runner = cases[0][2]
    if len(rows) == 3:
        print(f"  image / text-only served rate: {rows[1][2] / rows[0][2]:.2f} (graphs), "
              f"{rows[2][2] / rows[0][2]:.2f} (media passes eager)", flush=True)
    # batch invariance: content 0 (an image) alone, then packed with text-only and image contents
    program, arrays = compiled(job(6, 4, args.image, True, seed=5), ctx)
    alone = run(runner, arrays[:1], shapes)[0]
    packed = run(runner, arrays[:6], shapes)[0]
    shifted = run(runner, [arrays[1], arrays[0]] + arrays[2:6], shapes)[1]
    same = np.array_equal if not args.smoke else (lambda x, y: np.allclose(x, y, rtol=0, atol=1e-4))  # CPU: rounding
    if not (same(alone, packed) and same(alone, shifted)):
        failed.append(f"batch invariance: alone vs packed differ by {np.abs(alone - packed).max():.3g}, "
                      f"vs shifted by {np.abs(alone - shifted).max():.3g}")
    reads = [read for a in arrays[:6] for _, read in a.media]
    together = model.towers.embed(reads, device)
    if not torch.equal(model.towers.embed(reads[:1], device), together[:len(reads[0].embedded)]):
        failed.append("the first image's tower embeddings differ alone and beside the others")
    other, other_arrays = compiled(job(6, 4, args.image, True, seed=6), ctx)
    if np.array_equal(run(runner, other_arrays[:1], shapes)[0], alone):
        failed.append("a different image gave the same scores: the tower's embeddings did not reach the questions")
    print(f"\n{'job':<20} {'tokens/content':>15} {'questions/s':>12} {'tower share':>12} {'compile s':>10}")
    for label, tokens, rate, share, compile_seconds in rows:
        print(f"{label:<20} {tokens:>15,} {rate:>12,.0f} {share:>11.1%} {compile_seconds:>10.2f}")
    for failure in failed:
        print("FAILED:", failure)
    how = "within 1e-4 on the CPU" if args.smoke else "bit for bit"
    print("checks:", "failed" if failed else f"passed (batch invariance {how}, the image reaches the scores)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
