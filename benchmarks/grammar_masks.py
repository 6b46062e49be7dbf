"""Per-step token-mask cost of the structured-generation libraries on the embedded tokenizers (CPU).

    python -m benchmarks.grammar_masks [--repeats 50]

For each tokenizer (gemma3-270m: 262,144 tokens; smollm2-135m: 49,152) and each slot grammar of
spinfc/ir/decode_plan.py, with xgrammar and llguidance: the time to build the tokenizer's table once, to
compile the grammar, to start a matcher, to copy one (a beam that forks), and to fill the next-token mask at each
step of a typical answer (the answer's tokens accepted one by one). The masks of both libraries are compared at every
step (the same allowed set, or the run says where they differ).
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.harness import timing
from spinfc.ir.decode_plan import slot_regex
from spinfc.registry import load_tokenizer

ANSWERS = {"text": (' September"', '"'), "number": (" 1,250.5\n", "\n"), "amount": (" $12.50\n", "\n")}


def bits(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    return ((bitmask[0].view(-1, 1) >> torch.arange(32)) & 1).bool().view(-1)[:vocab]


def timed(fn, repeats: int) -> float:
    return timing.best_of(fn, repeats, warm=False).median


def run(name: str, repeats: int) -> list[str]:
    import llguidance
    import llguidance.hf
    import llguidance.torch as lgt
    import xgrammar as xgr

    tokenizer = load_tokenizer(name)
    vocab = len(tokenizer)
    lines = []
    start = time.perf_counter()
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab)
    compiler = xgr.GrammarCompiler(info)
    xgr_table = time.perf_counter() - start
    start = time.perf_counter()
    ll_tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab)
    ll_table = time.perf_counter() - start
    lines.append(f"{name} ({vocab} tokens): tokenizer table xgrammar {xgr_table:.2f} s, llguidance {ll_table:.2f} s")
    for kind, (answer, end) in ANSWERS.items():
        regex = slot_regex(kind, end if end != "\n" else "\n")
        ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
        start = time.perf_counter()
        compiled = compiler.compile_regex(regex)
        xgr_compile = time.perf_counter() - start
        start = time.perf_counter()
        ll_grammar = llguidance.LLMatcher.grammar_from_regex(regex)
        llguidance.LLMatcher(ll_tokenizer, ll_grammar)
        ll_compile = time.perf_counter() - start
        xgr_mask = xgr.allocate_token_bitmask(1, vocab)
        ll_mask = lgt.allocate_token_bitmask(1, vocab)

        def xgr_walk():
            m = xgr.GrammarMatcher(compiled)
            for token in ids:
                m.fill_next_token_bitmask(xgr_mask)
                assert m.accept_token(token)

        def ll_walk():
            m = llguidance.LLMatcher(ll_tokenizer, ll_grammar)
            for token in ids:
                lgt.fill_next_token_bitmask(m, ll_mask, 0)
                assert m.consume_token(token)

        xgr_start = timed(lambda: xgr.GrammarMatcher(compiled), repeats)
        ll_start = timed(lambda: llguidance.LLMatcher(ll_tokenizer, ll_grammar), repeats)
        xm, lm = xgr.GrammarMatcher(compiled), llguidance.LLMatcher(ll_tokenizer, ll_grammar)
        xgr_fork = timed(lambda: xm.fork(), repeats)
        ll_fork = timed(lambda: lm.deep_copy(), repeats)
        xgr_step = (timed(xgr_walk, repeats) - xgr_start) / len(ids)
        ll_step = (timed(ll_walk, repeats) - ll_start) / len(ids)
        differ = []
        xm, lm = xgr.GrammarMatcher(compiled), llguidance.LLMatcher(ll_tokenizer, ll_grammar)
        for step, token in enumerate(ids):
            xm.fill_next_token_bitmask(xgr_mask)
            lgt.fill_next_token_bitmask(lm, ll_mask, 0)
            a, b = bits(xgr_mask, vocab), bits(ll_mask, vocab)
            if not torch.equal(a, b):
                differ.append(f"step {step}: {int((a & ~b).sum())} only xgrammar, {int((b & ~a).sum())} only "
                              "llguidance")
            xm.accept_token(token)
            lm.consume_token(token)
        lines.append(
            f"  {kind:6} {len(ids)} steps | compile xgr {xgr_compile * 1e3:.1f} ms, llg {ll_compile * 1e3:.1f} ms | "
            f"matcher xgr {xgr_start * 1e6:.0f} us, llg {ll_start * 1e6:.0f} us | fork xgr {xgr_fork * 1e6:.1f} us, "
            f"llg {ll_fork * 1e6:.1f} us | mask a step xgr {xgr_step * 1e6:.0f} us, llg {ll_step * 1e6:.0f} us | "
            + ("masks equal" if not differ else "; ".join(differ)))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in ("gemma3-270m", "smollm2-135m"):
        print("\n".join(run(name, args.repeats)))


if __name__ == "__main__":
    main()
