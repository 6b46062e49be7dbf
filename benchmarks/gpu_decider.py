"""Decision models on one GPU, in one run: for each family with a decision head (Llama, Qwen3, Gemma 3 and Qwen3.5,
text and with their vision towers), a random 255-label `*ForSequenceClassification` snapshot served the way `spinfc
serve` runs it (`start_engine`: Triton ops, fixed launch sizes, CUDA graphs), its code distributions against
transformers' float32 softmax on the same prefixes, in float32 and in the CUDA default (fp16-mixed), and batch
invariance: a content's code logprobs alone and packed with 23 others, bit for bit on CUDA (within 1e-5 on the CPU,
whose passes are trimmed to their length). Exits non-zero on a failed check.

    python -m benchmarks.gpu_decider --tokenizer DIR [--out results/decider.json]     # on the GPU
    python -m benchmarks.gpu_decider --smoke                          # the same checks on the CPU (float32)

What it must show: every `float32` gap below 1e-4 (the CPU parity test's bound), every `fp16-mixed` gap below 2e-3
(p, a stated bound for half matmuls around a float32 residual stream and head), and `invariant: true` everywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import torch

from spinfc.config import EngineSettings
from spinfc.runtime.deliver.results import query_results
from spinfc.runtime.start import start_engine
from tests.decider.random_decider import FAMILIES, random_decider

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--smoke", action="store_true", help="the CPU in float32 (checks the script)")
ARGS.add_argument("--tokenizer", type=Path, default=None, help="SmolLM2's tokenizer as a folder (required on the "
                  "GPU, whose machine has no packaged model; the packaged one with --smoke)")
ARGS.add_argument("--families", nargs="*", default=list(FAMILIES))
ARGS.add_argument("--out", type=Path, default=None)

BOUNDS = {"float32": 1e-4, "fp16-mixed": 2e-3}
TEXTS = [f"Customer support message {i}:\nI was charged {i + 2} times for September; please refund the extra "
         f"charges and tell me why order {1000 + i} never arrived." for i in range(24)]
QUERIES = [{"id": "queue", "template": "\n\nWhich queue should take this message?\nCode:<?>", "codes": "all"},
           {"id": "pair", "template": "\n\nWhich of these fits best?<?>", "codes": ["L3", "code_004", "code_200"]}]


def body(texts: list[str]) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in texts],
            "scoring": {"queries": QUERIES}}


def reference(directory: Path):
    """transformers' float32 model of the snapshot and its softmax at the last token of a prefix (CPU)."""
    from transformers import AutoModelForSequenceClassification

    theirs = AutoModelForSequenceClassification.from_pretrained(directory, dtype=torch.float32,
                                                                attn_implementation="eager").eval()

    def softmax(tokens) -> list[float]:
        with torch.no_grad():
            return torch.softmax(theirs(input_ids=torch.tensor([list(tokens)])).logits[0].float(), -1).tolist()
    return theirs.config.id2label, softmax


def scored(engine, texts: list[str]):
    async def go():
        compiled = await engine.compile_async(body(texts))
        return await engine.score(compiled)
    return asyncio.run(go())


def check(directory: Path, device: str, dtype: str | None) -> dict:
    """One family on `device` in `dtype` (None: the device's default): the largest |p - transformers| over every code
    of every question of 24 contents (and their floor), and whether content 0 scores the same bits alone."""
    settings = EngineSettings(model=str(directory), device=device, dtype=dtype, warmup="short")
    running = start_engine(settings)
    try:
        engine = running.engine
        packed, alone = scored(engine, TEXTS), scored(engine, TEXTS[:1])
    finally:
        running.stop()
    id2label, softmax = reference(directory)
    codes = [id2label[i] for i in range(len(id2label))]
    program, floor = packed.compiled.program, packed.compiled.floor
    worst = 0.0
    for index in packed.compiled.inputs[:4] + (floor,):  # four contents and the floor against transformers
        results = {r.id: r.combinations[0] for r in query_results(program, packed.scores[index], packed.scores[floor])}
        for question in program.questions:
            want = softmax(program.contents[index].tokens + question.tokens)
            options = results[question.query_id].options
            rows = [codes.index(o.text) for o in options]
            total = sum(want[r] for r in rows)
            worst = max(worst, max(abs(o.p - want[r] / total) for o, r in zip(options, rows)))
    first = packed.compiled.inputs[0]
    together = [lp for question in packed.scores[first] for lp in question]
    solo = [lp for question in alone.scores[alone.compiled.inputs[0]] for lp in question]
    shift = max(abs(a - b) for a, b in zip(together, solo))
    # fixed launch shapes (CUDA) give the same bits; the CPU's trimmed passes agree within rounding
    invariant = shift == 0.0 if device.startswith("cuda") else shift < 1e-5
    return {"scheme": running.model.scheme, "max_p_gap": worst, "invariant": invariant, "alone_vs_packed": shift,
            "reads_per_content": sum(len(q.slot.options) for q in program.questions)}


def main(argv: list[str] | None = None) -> int:
    args = ARGS.parse_args(argv)
    if args.tokenizer is None and not args.smoke:
        ARGS.error("--tokenizer DIR is required on the GPU (its machine has no packaged model)")
    device = "cpu" if args.smoke else "cuda:0"
    schemes = [("float32", "float32")] if args.smoke else [("float32", "float32"), ("fp16-mixed", None)]
    results, failed = {}, []
    for family in args.families:
        with tempfile.TemporaryDirectory(prefix=f"decider-{family}-") as folder:
            random_decider(family, Path(folder), tokenizer_dir=args.tokenizer)
            for name, dtype in schemes:
                outcome = check(Path(folder), device, dtype)
                results[f"{family}/{name}"] = outcome
                ok = outcome["max_p_gap"] < BOUNDS[name] and outcome["invariant"]
                print(f"{family:16s} {outcome['scheme']:12s} max |p - transformers| {outcome['max_p_gap']:.2e} "
                      f"(bound {BOUNDS[name]:.0e}) invariant {outcome['invariant']}  {'ok' if ok else 'FAILED'}",
                      flush=True)
                if not ok:
                    failed.append(f"{family}/{name}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"device": device, "results": results, "failed": failed}, indent=2))
    print("FAILED: " + ", ".join(failed) if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
