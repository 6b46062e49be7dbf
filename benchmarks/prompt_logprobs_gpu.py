"""/v1/completions' prompt logprobs on CUDA (the compiled Triton ops in bf16, as the server runs them) against the
CPU float32 reference, on a random-weight Llama of a real shape; and the time of one packed read of a batch of
prompts as lm-evaluation-harness sends it.

    python -m benchmarks.prompt_logprobs_gpu [--device cuda:0] [--prompts 32] [--tokens 512]
    TRITON_INTERPRET=1 python -m benchmarks.prompt_logprobs_gpu --device cpu --dtype float32 --prompts 2 \
        --tokens 64 --budget 256        # checks the script itself without a GPU (slowly: Triton's interpreter)

Checks (exit 1 when one fails): every prompt token's logprob within 0.05 of the reference (bf16 activations), the
most likely next token the same at 99% of the rows or more, and the read's chosen logprob equal to its own top
logprob wherever the chosen token is the top one. Prints one JSON line with the numbers.
"""

from __future__ import annotations

import argparse
import json

import torch

from benchmarks.harness import timing
from benchmarks.harness.stacks import random_state_dict
from spinfc.runtime.models import build_model
from spinfc.runtime.launch.prompt_logprobs import prompt_program, score_prompts
from spinfc.runtime.weights.config import ModelConfig

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--device", default="cuda:0")
ARGS.add_argument("--prompts", type=int, default=32)
ARGS.add_argument("--tokens", type=int, default=512)
ARGS.add_argument("--budget", type=int, default=16384)
ARGS.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))

CONFIG = ModelConfig(family="llama", hidden=1024, layers=8, heads=16, kv_heads=4, head_dim=64, intermediate=4096,
                     vocab=32000, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False)


def main(argv: list[str] | None = None) -> int:
    args = ARGS.parse_args(argv)
    from spinfc.backend import triton_ops

    state = random_state_dict(CONFIG, "cpu", 0)
    g = torch.Generator().manual_seed(1)
    prompts = [tuple(torch.randint(1, CONFIG.vocab, (args.tokens,), generator=g).tolist()) for _ in range(args.prompts)]
    program = prompt_program(prompts, "random", budget=args.budget, block=128)
    gpu = build_model(CONFIG, state, ops=triton_ops, weights_hash="r", dtype=getattr(torch, args.dtype), device=args.device)
    score_prompts(gpu, program, top=1)  # compiles the kernels
    seconds, got = timing.once(lambda: score_prompts(gpu, program, top=1),
                               torch.cuda.synchronize if args.device.startswith("cuda") else None)
    cpu = build_model(CONFIG, state, weights_hash="r")
    check = prompt_program(prompts[:2], "random", budget=2 * -(-args.tokens // 128) * 128, block=128)
    want = score_prompts(cpu, check, top=1)
    worst = max(abs(a - b) for mine, theirs in zip(got, want) for a, b in zip(mine.logprobs, theirs.logprobs))
    rows = [(m[0][0] == t[0][0]) for mine, theirs in zip(got, want) for m, t in zip(mine.top, theirs.top)]
    agree = sum(rows) / len(rows)
    exact = all(lp == top[0][1] for s in got for i, lp in enumerate(s.logprobs)
                for top in [s.top[i]] if top[0][0] == s.tokens[i + 1])
    ok = worst < 0.05 and agree >= 0.99 and exact
    print(json.dumps({"ok": ok, "passes": len(program.layouts), "prompts": args.prompts, "tokens": args.tokens,
                      "seconds": round(seconds, 4), "tokens_per_second": round(args.prompts * args.tokens / seconds),
                      "max_abs_vs_cpu_fp32": worst, "top1_agreement": agree, "greedy_equal_exactly": exact}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
