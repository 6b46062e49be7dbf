"""The extraction decode on one GPU: its attention kernel against the reference, batch invariance from the kernel up
to whole extraction results, CUDA-graph replay against eager, and the GEMMs at the decode's fixed row count.

    python -m benchmarks.gpu_decode_checks [--json results.json]

Run from the repository root (it imports `spinfc`, `benchmarks/harness` and `tests/runtime/tree_launch.py`;
nothing else beyond torch, triton and xgrammar). Prints one line per check:

    kernel vs reference    decode_attention (bf16, and float32) against `reference.decode_attention` in float32
                           on the same inputs, at Llama 3 8B's heads (32 / 8, dim 128, a 20k-row pool, ~500 rows a
                           table) and Gemma 3's (4 / 1, dim 256, a 512-position window): relative error
    kernel alone/packed    three rows computed alone and among 125 others (other rows, other places): bit-identical
    extraction alone/packed  a small random Llama (bf16, Triton ops): greedy <gen> tokens and logprobs and forced
                           answer logprobs of one content's questions, its pass alone and packed with two other
                           contents and their questions: bit-identical
    graph vs eager         the packed extraction replayed from CUDA graphs and run eagerly: bit-identical
    gemm rows              each 8B product (and the LM head) at M = fixed.CUDA_ROWS: a row's bits with every other
                           row changed, and moved to another place, and (for information) at M = 512
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

from benchmarks.harness.stacks import SMALL_CONFIGS, random_state_dict

from spinfc.backend import reference, triton_ops
from spinfc.backend.kernels import decode_attention as kernel
from spinfc.runtime.extract import step as step_module
from spinfc.runtime.extract.beams import Forced, Sample
from spinfc.runtime.extract.decode import Start, walk
from spinfc.runtime.extract.kv import KeyPool, forward_keeping_kv, visible_rows
from spinfc.runtime.extract.fixed import CUDA_ROWS, launch_rows, pool_storage
from spinfc.runtime.launch.generate import Sampling
from spinfc.runtime.models import build_model
from tests.runtime.tree_launch import Case, Question, build_launch

DEVICE = "cuda"


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    return float("inf") if not torch.isfinite(got).all() else float((got - want).norm() / want.norm())


def attention_case(g: torch.Generator, rows: int, heads: int, kv_heads: int, dim: int, pool: int, tables: int,
                   slot_rows: int, window: int | None):
    """Random decode inputs shaped like a pass: each table a content's run of rows plus a few question rows."""
    randn = lambda *shape: torch.randn(*shape, generator=g, device=DEVICE)  # noqa: E731
    rng = random.Random(int(torch.randint(0, 1 << 30, (1,), generator=g, device=DEVICE)))
    pool_k, pool_v = randn(pool, kv_heads, dim), randn(pool, kv_heads, dim)
    pool_pos = torch.zeros(pool, dtype=torch.int64, device=DEVICE)
    listed = []
    for _ in range(tables):
        start, length = rng.randrange(0, pool - 600), rng.randrange(420, 520)
        entries = list(range(start, start + length)) + sorted(rng.sample(range(start + length, pool), 20))
        listed.append(entries)
        pool_pos[torch.tensor(entries, device=DEVICE)] = torch.arange(len(entries), device=DEVICE)
    width = max(map(len, listed))
    table = torch.zeros(tables, width, dtype=torch.int32, device=DEVICE)
    for t, entries in enumerate(listed):
        table[t, :len(entries)] = torch.tensor(entries, dtype=torch.int32, device=DEVICE)
    count = torch.tensor([len(e) for e in listed], dtype=torch.int32, device=DEVICE)
    slots = rows
    own_k, own_v = randn(slots, slot_rows, kv_heads, dim), randn(slots, slot_rows, kv_heads, dim)
    row_table = torch.tensor([rng.randrange(tables) for _ in range(rows)], device=DEVICE)
    row_own = torch.tensor([rng.randrange(1, slot_rows + 1) for _ in range(rows)], device=DEVICE)
    base = count[row_table].long()
    own_pos = base[:, None] + torch.arange(slot_rows, device=DEVICE)[None, :]
    positions = own_pos[torch.arange(rows, device=DEVICE), row_own - 1]
    return dict(q=randn(rows, heads, dim), pool_k=pool_k, pool_v=pool_v, pool_positions=pool_pos, table=table,
                table_count=count, own_k=own_k, own_v=own_v, own_positions=own_pos,
                row_slot=torch.arange(rows, device=DEVICE), row_table=row_table, row_own=row_own,
                positions=positions), dict(scale=dim**-0.5, window=window)


def cast(case: dict, dtype: torch.dtype) -> dict:
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in case.items()}


def kernel_checks(results: dict) -> None:
    g = torch.Generator(device=DEVICE).manual_seed(0)
    for name, shape in (("llama3-8b", (32, 8, 128, None)), ("gemma3", (4, 1, 256, 512))):
        heads, kv_heads, dim, window = shape
        case, kw = attention_case(g, CUDA_ROWS, heads, kv_heads, dim, 20480, 32, 17, window)
        want = reference.decode_attention(**case, **kw)
        for dtype in (torch.bfloat16, torch.float32):
            got = kernel.decode_attention(**cast(case, dtype), **kw)
            results[f"kernel vs reference {name} {str(dtype)[6:]}"] = rel_error(got, want)
        bf = cast(case, torch.bfloat16)
        packed = kernel.decode_attention(**bf, **kw)
        chosen = torch.tensor([3, CUDA_ROWS // 2, CUDA_ROWS - 1], device=DEVICE)
        alone = {**bf, "q": bf["q"][chosen], "row_slot": bf["row_slot"][chosen], "row_table": bf["row_table"][chosen],
                 "row_own": bf["row_own"][chosen], "positions": bf["positions"][chosen]}
        moved = {**bf, "q": bf["q"].flip(0), "row_slot": bf["row_slot"].flip(0), "row_table": bf["row_table"].flip(0),
                 "row_own": bf["row_own"].flip(0), "positions": bf["positions"].flip(0)}
        same = torch.equal(kernel.decode_attention(**alone, **kw), packed[chosen])
        same &= torch.equal(kernel.decode_attention(**moved, **kw).flip(0), packed)
        results[f"kernel alone/packed {name}"] = same


def small_model():
    config = SMALL_CONFIGS["llama"]
    state = random_state_dict(config, DEVICE, seed=1)
    return build_model(config, state, ops=triton_ops, name="random-llama", weights_hash="random-llama",
                       dtype=torch.bfloat16, device=DEVICE), config


def extraction(model, config, placed: list[tuple[int, Case]], budget: int):
    """Greedy <gen> (14 tokens) and forced options for every question of every placed case, in one walk: per case
    and question, (tokens, logprob, forced logprobs)."""
    launch, _ = build_launch(placed, budget)
    launch = launch.to(DEVICE)
    _, keys, values = forward_keeping_kv(model, launch)
    pool = KeyPool(keys, values, launch.positions, pool_storage(model, budget, keys[0]))
    ends = launch.ends.cpu()
    starts, owners = [], []
    for index, (start, case) in enumerate(placed):
        row = start + len(case.content)
        for qi, question in enumerate(case.questions):
            row += len(question.prompt)
            seen = visible_rows(ends, row - 1, start)
            token, position = int(launch.tokens[row - 1]), int(launch.positions[row - 1])
            starts.append(Start(Sample(None, frozenset(), "", Sampling(max_tokens=14, temperature=0.0)), seen,
                                token, position, 14))
            starts.append(Start(Forced(list(question.options)), seen, token, position, 16))
            owners.append((index, qi))
            row += sum(map(len, question.options))
    walk(model, pool, starts)
    out = {}
    for k, key in enumerate(owners):
        sample, forced = starts[2 * k].walker, starts[2 * k + 1].walker
        out[key] = (tuple(sample.tokens), sample.logprob, tuple(forced.logprobs))
    return out


def extraction_checks(results: dict) -> None:
    model, config = small_model()
    rng = random.Random(5)
    draw = lambda n: tuple(rng.randrange(1, config.vocab) for _ in range(n))  # noqa: E731
    case = lambda: Case(draw(rng.randrange(40, 100)), tuple(  # noqa: E731
        Question(draw(rng.randrange(3, 9)), tuple(draw(rng.randrange(1, 12)) for _ in range(3))) for _ in range(2)))
    target, others = case(), [case(), case()]
    budget = 1024
    results["decode launch rows (row-invariant)"] = launch_rows(model)
    step_module.warm_up(model, budget)  # the pool and the first shapes' graphs before any request, as a server would
    alone = extraction(model, config, [(0, target)], budget)
    packed_cases = [(0, others[0]), (256, others[1]), (640, target)]
    packed = extraction(model, config, packed_cases, budget)
    results["extraction alone/packed"] = all(alone[(0, q)] == packed[(2, q)] for q in range(2))
    step_module.CAPTURE = False
    try:
        eager = extraction(model, config, packed_cases, budget)
    finally:
        step_module.CAPTURE = True
    results["graph vs eager"] = eager == packed
    results["extraction sample"] = alone[(0, 0)][0][:6]


def gemm_checks(results: dict) -> None:
    g = torch.Generator(device=DEVICE).manual_seed(2)
    products = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
                "head": (128256, 4096)}
    M = CUDA_ROWS
    for name, (N, K) in products.items():
        w = (torch.randn(N, K, generator=g, device=DEVICE) * 0.02).to(torch.bfloat16)
        x = torch.randn(M, K, generator=g, device=DEVICE).to(torch.bfloat16)
        y = x @ w.t()
        other = torch.randn(M, K, generator=g, device=DEVICE).to(torch.bfloat16)
        kept = torch.tensor([0, M // 2, M - 1], device=DEVICE)
        other[kept] = x[kept]
        others_changed = torch.equal((other @ w.t())[kept], y[kept])
        moved = torch.equal((x.flip(0) @ w.t()).flip(0), y)
        big = torch.randn(512, K, generator=g, device=DEVICE).to(torch.bfloat16)
        big[:M] = x
        cross = torch.equal((big @ w.t())[:M], y)
        results[f"gemm rows {name} M={M}"] = f"others changed {others_changed}, moved {moved}; same as M=512 {cross}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results: dict = {}
    for check in (kernel_checks, extraction_checks, gemm_checks):
        try:
            check(results)
        except Exception as error:  # report and go on: one broken check should not hide the others
            results[check.__name__] = f"FAILED: {type(error).__name__}: {error}"
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, decode launch rows {CUDA_ROWS}")
    for name, value in results.items():
        shown = f"{value:.2e}" if isinstance(value, float) else value
        print(f"  {name:42s} {shown}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
