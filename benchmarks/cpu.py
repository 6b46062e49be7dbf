"""CPU throughput: spinfc's packed tree against transformers, on the seed-shaped job (benchmarks/job.py).

    python benchmarks/cpu.py [--model smollm2-135m] [--contents 4] [--token-budget 2048] [--baseline-contents 1]

Three ways to score the same questions with the same weights (fp32, CPU):
  spinfc       the compiled request: each content read once, its 56 questions as branches, packed passes
  hf-each      transformers, one sequence per question (content + question), batched, logits at the last row only
  hf-kv-reuse  transformers, the content's KV cache computed once and reused by its 56 questions (a prefix cache)

A rate is questions per second of wall time, compile and tokenization included for spinfc. The transformers
baselines may run on fewer contents (--baseline-contents): a rate per question does not depend on how many.
Every path is checked against the others: the largest logprob difference is printed beside the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import job  # noqa: E402

from spinfc import registry  # noqa: E402
from spinfc.runtime.loader import load_model  # noqa: E402
from spinfc.shapes import Shapes  # noqa: E402


def spinfc_scores(model_name: str, contents: list[str], budget: int) -> tuple[float, torch.Tensor, dict]:
    """Seconds, logprobs [contents, questions, options], and the engine's numbers: the request goes through the
    engine a server runs (compile, pack, the passes trimmed to the blocks they use on the CPU, results)."""
    import asyncio

    from spinfc.runtime.engine import Engine

    engine = Engine(load_model(model_name), Shapes.for_device("cpu", budget)).start()
    try:
        start = time.perf_counter()
        scored = asyncio.run(engine.score(engine.compile(job.request_body(contents))))
        seconds = time.perf_counter() - start
    finally:
        engine.close()
    out = torch.tensor([[[o.logprob for o in result.combinations[0].options] for result in per_input]
                        for per_input in scored.results()])
    stats = engine.stats
    plan = {"passes": stats.passes, "tokens": stats.rows_used, "rows_launched": stats.rows_total}
    return seconds, out, plan


def hf_model(model_name: str):
    from transformers import AutoModelForCausalLM

    source = registry.resolve(model_name)
    return AutoModelForCausalLM.from_pretrained(
        str(source.gguf.parent), gguf_file=source.gguf.name, dtype=torch.float32
    ).eval()


def encode(tokenizer, contents: list[str]):
    contents_ids = [tokenizer(text)["input_ids"] for text in contents]
    prompts = [tokenizer(job.template(q).removesuffix("<?>"), add_special_tokens=False)["input_ids"]
               for q in job.QUESTIONS]
    options = [tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in job.OPTIONS]
    return contents_ids, prompts, torch.tensor(options)


def hf_each(model, tokenizer, contents: list[str], batch: int) -> tuple[float, torch.Tensor]:
    """One sequence per question, left-padded batches, logits for the last row only."""
    contents_ids, prompts, options = encode(tokenizer, contents)
    out = torch.zeros(len(contents), len(prompts), len(options))
    start = time.perf_counter()
    with torch.inference_mode():
        for c, content_ids in enumerate(contents_ids):
            for b in range(0, len(prompts), batch):
                seqs = [content_ids + p for p in prompts[b:b + batch]]
                width = max(map(len, seqs))
                ids = torch.tensor([[0] * (width - len(s)) + s for s in seqs])
                mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
                position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                               logits_to_keep=1).logits[:, -1]
                out[c, b:b + len(seqs)] = logits.float().log_softmax(-1)[:, options]
    return time.perf_counter() - start, out


def hf_kv_reuse(model, tokenizer, contents: list[str]) -> tuple[float, torch.Tensor]:
    """The content once, its KV cache repeated for all questions, the questions right-padded in one batch."""
    contents_ids, prompts, options = encode(tokenizer, contents)
    out = torch.zeros(len(contents), len(prompts), len(options))
    start = time.perf_counter()
    with torch.inference_mode():
        for c, content_ids in enumerate(contents_ids):
            length = len(content_ids)
            cache = model(input_ids=torch.tensor([content_ids]), use_cache=True).past_key_values
            cache.batch_repeat_interleave(len(prompts))
            width = max(map(len, prompts))
            ids = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
            mask = torch.tensor([[1] * (length + len(p)) + [0] * (width - len(p)) for p in prompts])
            position_ids = torch.arange(length, length + width).expand(len(prompts), -1)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                           past_key_values=cache).logits
            last = torch.tensor([len(p) - 1 for p in prompts])
            out[c] = logits[torch.arange(len(prompts)), last].float().log_softmax(-1)[:, options]
    return time.perf_counter() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contents", type=int, default=4)
    parser.add_argument("--baseline-contents", type=int, default=1)
    parser.add_argument("--token-budget", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=8, help="questions per batch for hf-each")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    torch.manual_seed(0)

    tokenizer = registry.load_tokenizer(args.model)
    contents = [job.content(i, tokenizer) for i in range(args.contents)]
    n_questions = len(job.QUESTIONS)
    rows = []

    seconds, ours, plan = spinfc_scores(args.model, contents, args.token_budget)
    rows.append(("spinfc", args.contents * n_questions, seconds))

    model = hf_model(args.model)
    base = contents[: args.baseline_contents]
    each_s, each = hf_each(model, tokenizer, base, args.batch)
    rows.append(("hf-each", len(base) * n_questions, each_s))
    reuse_s, reuse = hf_kv_reuse(model, tokenizer, base)
    rows.append(("hf-kv-reuse", len(base) * n_questions, reuse_s))

    k = len(base)
    diff = {"spinfc vs hf-each": (ours[:k] - each).abs().max().item(),
            "hf-kv-reuse vs hf-each": (reuse - each).abs().max().item()}
    rate = {name: count / s for name, count, s in rows}
    print(f"model {args.model}, {args.contents} contents x {n_questions} questions, token budget "
          f"{args.token_budget}: {plan['passes']} passes, {plan['tokens']} tokens (the floor included) in "
          f"{plan['rows_launched']} rows launched")
    print(f"max |logprob difference|: " + ", ".join(f"{k} {v:.2e}" for k, v in diff.items()))
    print(f"{'method':<12} {'questions':>9} {'seconds':>8} {'questions/s':>12} {'spinfc is':>10}")
    for name, count, s in rows:
        print(f"{name:<12} {count:>9} {s:>8.2f} {rate[name]:>12.2f} {rate['spinfc'] / rate[name]:>9.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "plan": plan,
                                         "rates": rate, "max_diff": diff}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
