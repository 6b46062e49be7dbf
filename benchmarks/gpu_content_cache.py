"""The content cache on one GPU: a pass whose content comes from the cache against the same pass read anew, on small
random-weight models with the Triton ops (Llama, and Gemma 3 with sliding-window layers), bit for bit.

    python -m benchmarks.gpu_content_cache [--device cuda] [--dtype bfloat16]     # the check (exits 1 on a failure)
    python -m benchmarks.gpu_content_cache --device cpu --dtype float32           # the script, on the reference ops

Per family, two contents with questions (`tests/runtime/tree_launch.py`) are read in one pass (A) and the
keys and values of the second are kept (`cached_rows.PassCache`'s slicing). Then:

    same pass      pass A again with the second content from the cache: its logprobs, and every layer's keys and values
                   of the layout (what the extraction decode reads), against pass A's
    other pass     the second content placed elsewhere among other neighbours (pass B), read anew and from the cache
    timing         pass B read anew and from the cache (eager, median of 5)

On CUDA the checks are exact equality; on the CPU (the reference ops) they print the largest difference and allow
1e-5. Needs torch, triton and the repository; no internet, random weights.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.harness.stacks import SMALL_CONFIGS, random_state_dict

from spinfc.runtime.launch.cached_rows import reading
from spinfc.runtime.launch.content_cache import CachedContent
from spinfc.runtime.extract.kv import forward_keeping_kv
from spinfc.runtime.models import build_model
from tests.runtime.tree_launch import Case, Question, build_launch


def case(g: torch.Generator, vocab: int, content: int, questions: int) -> Case:
    draw = lambda n: tuple(torch.randint(1, vocab, (n,), generator=g).tolist())  # noqa: E731
    return Case(draw(content), tuple(Question(draw(12), (draw(1), draw(2))) for _ in range(questions)))


def run(model, launch):
    with torch.inference_mode():
        out, keys, values = forward_keeping_kv(model, launch)
    return out, keys, values


def differ(a, b) -> float:
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(a, b))


def check_family(family: str, device: str, dtype: torch.dtype, exact: bool) -> dict[str, tuple[bool, str]]:
    config = SMALL_CONFIGS[family]
    ops = None
    if device.startswith("cuda"):
        from spinfc.backend import triton_ops

        ops = triton_ops
    model = build_model(config, random_state_dict(config, device, seed=2), ops=ops, name=f"random-{family}",
                        weights_hash=f"random-{family}", dtype=dtype, device=device)
    g = torch.Generator().manual_seed(3)
    first, second, third = (case(g, config.vocab, n, 6) for n in (300, 230, 170))
    budget = 1024
    at_a, at_b = -(-first.size // 128) * 128, -(-third.size // 64) * 64  # the second content's start in A, in B
    a_launch, _ = build_launch([(0, first), (at_a, second)], budget)
    b_launch, _ = build_launch([(0, third), (at_b, second)], budget)  # second elsewhere, another neighbour
    a_launch, b_launch = a_launch.to(device), b_launch.to(device)
    a_out, a_keys, a_values = run(model, a_launch)
    length = len(second.content)
    entry = CachedContent(length, tuple(k[at_a:at_a + length].clone() for k in a_keys),
                          tuple(v[at_a:at_a + length].clone() for v in a_values))
    same_out, same_keys, same_values = run(model, reading(a_launch, [0, at_a], [None, entry]))
    b_out, _, _ = run(model, b_launch)
    cached_b = reading(b_launch, [0, at_b], [None, entry])
    b_cached_out, _, _ = run(model, cached_b)
    results = {}
    tolerance = 0.0 if exact else 1e-5
    for name, got, want in (("same pass: logprobs", [same_out], [a_out]),
                            ("same pass: keys and values", same_keys + same_values, a_keys + a_values),
                            ("other pass: logprobs", [b_cached_out], [b_out])):
        difference = differ(got, want)
        ok = (all(torch.equal(x, y) for x, y in zip(got, want)) if exact else difference <= tolerance)
        results[f"{family} {name}"] = (ok, f"max |difference| {difference:.2e}")
    timings = {}
    for label, launch in (("anew", b_launch), ("from the cache", cached_b)):
        seconds = []
        for _ in range(5):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            started = time.perf_counter()
            run(model, launch)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
        timings[label] = statistics.median(seconds)
    results[f"{family} timing"] = (True, ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in timings.items()))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    args = parser.parse_args(argv)
    exact = args.device.startswith("cuda")
    failed = False
    for family in ("llama", "gemma3"):
        print(f"{family} ...", flush=True)
        for name, (ok, detail) in check_family(family, args.device, getattr(torch, args.dtype), exact).items():
            failed |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name:<40} {detail}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
