"""What one `<*>` slot adds to the seed-shaped job, measured in scoring tokens of the same run.

    python -m benchmarks.extraction [--model smollm2-135m | --shape llama3-8b] [--device cuda] [--dtype bfloat16]
                                    [--contents 24] [--token-budget 16384] [--beam-width 4] [--runs 3]

Two requests through the engine a server runs (compile, shared passes, results), on the same contents
(benchmarks/harness/jobs.py: about 470 tokens each, 56 two-option questions):

    scoring      the job as it is
    +extraction  the same job with one `<*>` query added to each content (`A: "<*>"`, beam_width, max_tokens 16)

Both are run once untimed first (lazy initialisation, the floor of each question set cached as a server keeps it),
then `--runs` times each, alternating; the medians are compared. The figure is

    tokens per slot = (median +extraction seconds - median scoring seconds) / contents
                      / (median scoring seconds / scoring tokens)

i.e. the decode's added wall time per searched slot, in units of the time the same run spends on one token of
scoring. The seed reports 200-600 scoring tokens per searched slot. `--shape llama3-8b` builds a random-weight
Llama 3 8B (the GPU benchmarks' shape) with SmolLM2's tokenizer and vocabulary: its answers are noise and often run
to max_tokens, so it measures a slot's worst case; the decode launches (search steps and forced floor reads, each
`fixed.launch_rows` rows on CUDA, replayed from a CUDA graph) and the rows they fed are printed beside the figure, with
the added time per launch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

import attrs
import torch

from benchmarks.harness import jobs as job

from spinfc.config import EngineSettings
from spinfc.registry import load_tokenizer
from spinfc.runtime.engine import Engine
from spinfc.runtime.start import start_engine

SLOT = {"id": "subject", "template": "\n\nQ: Who or what is the article mainly about?\nA: \"<*>\"", "max_tokens": 16}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_model(args):
    """The stack a server loads on this device (the Triton ops on CUDA, the PyTorch reference elsewhere) in
    --dtype: the named model, or random weights at --shape."""
    ops = None
    if args.device.startswith("cuda"):
        from spinfc.backend import triton_ops as ops
    if args.shape is None:
        from spinfc.runtime.load.loader import load_model

        return load_model(args.model, dtype=DTYPES[args.dtype], device=args.device, ops=ops)
    from benchmarks.harness.stacks import LLAMA3_8B, random_state_dict

    from spinfc.runtime.models import build_model as build

    vocab = len(load_tokenizer(tokenizer_name(args)))
    config = attrs.evolve(LLAMA3_8B, vocab=vocab)
    state = random_state_dict(config, args.device, seed=0)
    return build(config, state, ops=ops, name=tokenizer_name(args), weights_hash="random-llama3-8b",
                 dtype=DTYPES[args.dtype], device=args.device)


def tokenizer_name(args) -> str:
    """SmolLM2's tokenizer: the embedded model's, or a tokenizer folder given with --tokenizer (a machine without
    the model package), made a snapshot name by a config.json beside it."""
    if not args.tokenizer:
        return "smollm2-135m"
    import shutil
    from pathlib import Path

    folder = Path("/tmp/spinfc-extraction-tokenizer")
    folder.mkdir(parents=True, exist_ok=True)
    for file in Path(args.tokenizer).iterdir():
        shutil.copy(file, folder / file.name)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return str(folder)


def run_once(engine: Engine, body: dict) -> tuple[float, int, int, int]:
    """Seconds, rows scored, decode steps and decode beam rows of one request."""
    stats = engine.stats
    before = (stats.rows_used, stats.decode_steps, stats.decode_rows)
    if str(engine.device).startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    asyncio.run(engine.score(engine.compile(body)))
    if str(engine.device).startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return (seconds, stats.rows_used - before[0], stats.decode_steps - before[1], stats.decode_rows - before[2])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--shape", choices=("llama3-8b",), default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None)
    parser.add_argument("--contents", type=int, default=24)
    parser.add_argument("--token-budget", type=int, default=None)
    parser.add_argument("--beam-width", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder for --shape (default: SmolLM2's)")
    args = parser.parse_args(argv)
    on_cuda = args.device.startswith("cuda")
    args.dtype = args.dtype or ("bfloat16" if on_cuda else "float32")
    budget = args.token_budget or (16384 if on_cuda else 2048)
    model = build_model(args)
    tokenizer = load_tokenizer(tokenizer_name(args) if args.shape else args.model)
    contents = [job.content(i, tokenizer) for i in range(args.contents)]
    scoring = job.request_body(contents)
    extracting = json.loads(json.dumps(scoring))
    extracting["scoring"]["queries"].append({**SLOT, "beam_width": args.beam_width})
    settings = EngineSettings(model=tokenizer_name(args) if args.shape else args.model, device=args.device,
                              token_budget=budget)
    running = start_engine(settings, load_model=lambda name, precision, device: model, extraction=True)
    engine = running.engine
    try:
        run_once(engine, scoring)
        run_once(engine, extracting)
        plain, extra = [], []
        for _ in range(args.runs):
            plain.append(run_once(engine, scoring))
            extra.append(run_once(engine, extracting))
    finally:
        running.stop()
    t0 = statistics.median(r[0] for r in plain)
    t1 = statistics.median(r[0] for r in extra)
    tokens = plain[0][1]
    per_token = t0 / tokens
    per_slot = (t1 - t0) / args.contents
    result = {
        "model": args.shape or args.model, "device": args.device, "dtype": args.dtype, "contents": args.contents,
        "budget": budget, "beam_width": args.beam_width, "scoring_seconds": t0, "extraction_seconds": t1,
        "scoring_tokens": tokens, "decode_steps": extra[0][2], "decode_beam_rows": extra[0][3],
        "added_seconds_per_slot": per_slot, "scoring_tokens_per_slot": per_slot / per_token,
        "runs": {"scoring": plain, "extraction": extra},
    }
    print(f"{result['model']} on {args.device} ({args.dtype}), {args.contents} contents, budget {budget}, "
          f"beam width {args.beam_width}")
    print(f"  scoring      {t0:.3f} s  ({tokens} tokens: {per_token * 1e6:.1f} us a token)")
    launches = statistics.median(r[2] for r in extra)
    print(f"  +extraction  {t1:.3f} s  ({extra[0][2]} decode launches, {extra[0][3]} rows fed; "
          f"{(t1 - t0) / max(1, launches) * 1e3:.2f} ms added per launch)")
    print(f"  added per slot: {per_slot * 1e3:.1f} ms = {per_slot / per_token:.0f} scoring tokens")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
