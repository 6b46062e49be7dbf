"""The host's share of one extraction decode step, on the CPU: what a GPU step waits for besides the model.

    python -m benchmarks.decode_host [--walkers 25] [--width 4] [--steps 12] [--tokenizer smollm2-135m]

`--walkers` `<*>` searches (beam width `--width`, so about walkers x width beams) step through random
log-probabilities of the tokenizer's vocabulary (a peaked draw, so the best candidates hold a few tokens), exactly as
`decode._step` drives them, without a model. Per step, the median of:

    masks      build every beam's token mask (xgrammar's batch matcher) and beam log-probability: on the GPU this
               runs while the device computes the step, so it is hidden unless it takes longer
    select     mask, add, top-k and copy back (here on the CPU; on the GPU a few device kernels)
    advance    every walker's decision from its candidates (forks, token checks): in series with the GPU
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from spinfc.registry import load_tokenizer
from spinfc.runtime.admit.chat_format import end_tokens
from spinfc.runtime.extract import decode
from spinfc.runtime.extract.beams import Part, Search
from spinfc.runtime.extract.grammars import Grammars, slot_regex


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--walkers", type=int, default=25)
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--tokenizer", default="smollm2-135m")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tokenizer = load_tokenizer(args.tokenizer)
    vocab = len(tokenizer)
    grammars = Grammars(tokenizer, vocab, end_tokens(tokenizer))
    ending = ('"', *grammars.ending_tokens(tokenizer, '"'))
    walkers = [Search(grammars, slot_regex("text", '"'), args.width, args.steps + 1, ending, terminated=True)
               for _ in range(args.walkers)]
    g = torch.Generator().manual_seed(0)
    owners = list(range(len(walkers)))
    times = {"masks": [], "select": [], "advance": []}
    beams = []
    for _ in range(args.steps):
        n = len(owners)
        logits = torch.randn(n, vocab, generator=g) * 3
        logprobs = torch.log_softmax(logits, dim=-1)
        t0 = time.perf_counter()
        bitmask, beam_logprobs = decode._constraints(walkers, owners, n, vocab, grammars)
        t1 = time.perf_counter()
        values, top, totals = decode._best(logprobs, bitmask, beam_logprobs)
        t2 = time.perf_counter()
        next_owners, first = [], 0
        while first < n:
            w, last = owners[first], first
            while last < n and owners[last] == w:
                last += 1
            part = Part(values[first:last], top[first:last], vocab, lambda a=first, b=last: totals[a:b])
            next_owners += [w] * len(walkers[w].advance(part))
            first = last
        t3 = time.perf_counter()
        times["masks"].append(t1 - t0)
        times["select"].append(t2 - t1)
        times["advance"].append(t3 - t2)
        beams.append(n)
        owners = next_owners
        if not owners:
            break
    print(f"{args.walkers} searches of width {args.width} on {args.tokenizer} ({vocab} tokens), "
          f"{len(beams)} steps, beams per step: median {statistics.median(beams):.0f}, max {max(beams)}")
    for name, values in times.items():
        print(f"  {name:8s} median {statistics.median(values) * 1e3:7.2f} ms   max {max(values) * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
