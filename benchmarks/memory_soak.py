"""Resident memory of a server over a stream of varied requests (issue 38): `spinfc serve` in a child process
(harness/serving.py), N requests over HTTP (scores with a question set of their own, extraction slots, chat and
completions), the server process's resident set size after every 100, and its growth from the end of the warm-up
(the first `--warm`) to the end, each read after `--settle` seconds idle (MALLOC_ARENA_MAX in the environment
reaches the server; `--root` serves another checkout, for an A/B). Every cache the server keeps between requests is bounded; the content cache, the
largest, is reported beside from /metrics (its budget is --content-cache-tokens: unset, a tenth of the memory, at
most 4 GiB, on the CPU).

    python -m benchmarks.memory_soak --smoke                       # a random-weight llama, 120 requests
    python -m benchmarks.memory_soak --model smollm2-135m -n 1000  # what BENCHMARKS.md reports
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from benchmarks.harness import models
from benchmarks.harness.clients import metric
from benchmarks.harness.serving import served

WORDS = "refund invoice delivery broken screen password account late parcel charge twice cancel order".split()


def request(i: int) -> tuple[str, dict]:
    """The i-th request: its own content, and (for scores) a question set of its own."""
    rng = random.Random(i)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + f" (ticket {i})"
    messages = [{"role": "user", "content": text}]
    kind = i % 6
    if kind == 0:
        topics = [f"{rng.choice(WORDS)} case {i}-{k}" for k in range(20)]
        return "/v1/score", {"messages": messages, "scoring": {"queries": [
            {"id": "about", "template": f"\n\nRequest {i}: is it about {{t}}?\nAnswer:<?>",
             "options": [" yes", " no", " not sure"], "placeholders": {"t": topics}}]}}
    if kind == 1:
        return "/v1/score", {"messages": messages, "scoring": {"queries": [
            {"id": "refund", "template": "\n\nIs this a refund request?\nAnswer:<?>", "options": [" yes", " no"]}]}}
    if kind == 2:
        return "/v1/score", {"messages": messages, "scoring": {"queries": [
            {"id": "n", "template": f"\n\nHow many orders ({i})?\nA: <n>"},
            {"id": "what", "template": '\n\nQ: What is it about?\nA: "<*>"', "max_tokens": 6}]}}
    if kind == 3:
        return "/v1/score", {"messages": messages, "scoring": {"queries": [
            {"id": "m", "template": f"\n\nHow much money ({i})?\nA: <$>"}]}}
    if kind == 4:
        return "/v1/chat/completions", {"messages": messages, "max_tokens": 4, "temperature": 0.7, "seed": i}
    return "/v1/completions", {"prompt": [text, f"Story {i}:"], "max_tokens": 3, "echo": i % 2 == 0, "logprobs": 1}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("-n", type=int, help="requests (default 1000; 120 with --smoke)")
    parser.add_argument("--warm", type=int, help="requests before the reference reading (default 300; 40 with --smoke)")
    parser.add_argument("--every", type=int, default=100, help="requests between readings (default 100)")
    parser.add_argument("--content-cache-tokens", type=int, help="the content cache's budget (default: the server's)")
    parser.add_argument("--smoke", action="store_true", help="a random-weight llama, 120 requests, 40 to warm up")
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds idle before each reading (default 0.5: past the engine's idle trim)")
    parser.add_argument("--root", type=Path, default=None, help="the checkout whose `spinfc serve` runs (an A/B)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="spinfc-soak-"))
    model = args.model
    if args.smoke:  # a two-layer llama of tiny widths with SmolLM2's tokenizer
        model = str(work / "model")
        models.snapshot("llama-3-8b", work / "model", models.tokenizer_folder("smollm2-135m", work / "tokenizer"),
                        layers=2, tiny=True)
    args.n = args.n or (120 if args.smoke else 1000)
    args.warm = args.warm or (40 if args.smoke else 300)
    cache = () if args.content_cache_tokens is None else ("--content-cache-tokens", str(args.content_cache_tokens))
    root = {} if args.root is None else {"root": args.root}
    with served(model, "cpu", work / "server.log", args=("--warmup", "none", *cache), **root) as server, \
            httpx.Client(base_url=server.url, timeout=600) as client:
        process = psutil.Process(server.process.pid)

        def reading() -> str:
            page = client.get("/metrics").text
            return (f"resident {process.memory_info().rss / 2**20:8.1f} MB  content cache "
                    f"{metric(page, 'spinfc_content_cache_tokens'):,.0f} of "
                    f"{metric(page, 'spinfc_content_cache_budget_tokens'):,.0f} tokens")

        started, reference = time.perf_counter(), None
        for i in range(args.n):
            path, body = request(i)
            answer = client.post(path, json=body)
            if answer.status_code != 200:
                raise SystemExit(f"request {i} ({path}): {answer.status_code} {answer.text[:300]}")
            read = (i + 1) % args.every == 0 or i + 1 == args.n or i + 1 == args.warm
            if read:
                time.sleep(args.settle)
            if i + 1 == args.warm:
                reference = process.memory_info().rss / 2**20
            if read:
                print(f"{i + 1:5d} requests  {time.perf_counter() - started:7.1f} s  {reading()}", flush=True)
        end = process.memory_info().rss / 2**20
    print(f"growth from request {args.warm} to {args.n}: {end - reference:+.1f} MB resident "
          f"({(end - reference) / (args.n - args.warm) * 100:+.2f} MB per 100 requests)")


if __name__ == "__main__":
    main()
