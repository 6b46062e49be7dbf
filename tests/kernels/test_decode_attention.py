"""Decode attention (Triton, interpreted) against the PyTorch reference on fresh random pools, tables and slots, and
its batch invariance: rows computed alone and packed among other rows, with their pool rows, table and slot moved
to other places, agree within the interpreter's tolerance (bit-identity is checked on CUDA by
the acceptance run's `turns`, benchmarks/acceptance/kinds.py)."""

from __future__ import annotations

import random

import pytest
import torch

from spinfc.backend.kernels import decode_attention as kernel

# |alone - packed| allowed under the interpreter (NumPy products on the host): a few float32 steps of values ~1
INVARIANCE_TOL = 1e-6


def random_case(rng: random.Random, g: torch.Generator, *, rows: int, heads: int, kv_heads: int, dim: int,
                pool: int, tables: int, slots: int, own: int):
    """A random decode batch: every table a sorted random subset of the pool (maybe empty), every row a random
    table, slot and own count (at least 1: a row sees itself); positions grow along a table and then a slot."""
    pool_k, pool_v = torch.randn(pool, kv_heads, dim, generator=g), torch.randn(pool, kv_heads, dim, generator=g)
    pool_pos = torch.randint(0, 40, (pool,), generator=g)
    listed = [sorted(rng.sample(range(pool), rng.randrange(0, min(pool, 70)))) for _ in range(tables)]
    width = max(1, max(map(len, listed)))
    table = torch.zeros(tables, width, dtype=torch.int32)
    for t, entries in enumerate(listed):
        table[t, :len(entries)] = torch.tensor(entries, dtype=torch.int32)
    count = torch.tensor([len(e) for e in listed], dtype=torch.int32)
    own_k = torch.randn(slots, own, kv_heads, dim, generator=g)
    own_v = torch.randn(slots, own, kv_heads, dim, generator=g)
    own_pos = 40 + torch.arange(own)[None, :].repeat(slots, 1)
    row_slot = torch.tensor([rng.randrange(slots) for _ in range(rows)], dtype=torch.int32)
    row_table = torch.tensor([rng.randrange(tables) for _ in range(rows)], dtype=torch.int32)
    row_own = torch.tensor([rng.randrange(1, own + 1) for _ in range(rows)], dtype=torch.int32)
    positions = own_pos[row_slot.long(), row_own.long() - 1]
    q = torch.randn(rows, heads, dim, generator=g)
    return dict(q=q, pool_k=pool_k, pool_v=pool_v, pool_positions=pool_pos, table=table, table_count=count,
                own_k=own_k, own_v=own_v, own_positions=own_pos, row_slot=row_slot, row_table=row_table,
                row_own=row_own, positions=positions)


@pytest.mark.parametrize("heads, kv_heads, dim, window", [
    (4, 2, 16, None),  # GQA
    (2, 2, 24, 9),  # a head dim that is not a power of two, a window crossing the pool and the own rows
    (3, 1, 32, 30),  # one key/value head shared by three, a window that cuts into the pool
])
def test_matches_reference(heads, kv_heads, dim, window, seed):
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    case = random_case(rng, g, rows=7, heads=heads, kv_heads=kv_heads, dim=dim, pool=150, tables=3, slots=4, own=6)
    got = kernel.decode_attention(**case, scale=dim**-0.5, window=window)
    want = kernel.reference(**case, scale=dim**-0.5, window=window)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5, msg=lambda m: f"seed {seed}: {m}")


def test_a_row_with_an_empty_table_sees_its_own_rows_only(seed):
    g = torch.Generator().manual_seed(seed)
    q, own_v = torch.randn(1, 2, 16, generator=g), torch.randn(1, 3, 1, 16, generator=g)
    case = dict(q=q, pool_k=torch.randn(4, 1, 16, generator=g), pool_v=torch.randn(4, 1, 16, generator=g),
                pool_positions=torch.zeros(4, dtype=torch.int64), table=torch.zeros(1, 1, dtype=torch.int32),
                table_count=torch.zeros(1, dtype=torch.int32), own_k=torch.randn(1, 3, 1, 16, generator=g), own_v=own_v,
                own_positions=torch.arange(3)[None, :], row_slot=torch.zeros(1, dtype=torch.int32),
                row_table=torch.zeros(1, dtype=torch.int32), row_own=torch.ones(1, dtype=torch.int32),
                positions=torch.zeros(1, dtype=torch.int64))
    got = kernel.decode_attention(**case, scale=0.25, window=None)
    torch.testing.assert_close(got, own_v[0, 0].expand(2, 16)[None])  # one visible row: its value, every head


def _moved(case, rng: random.Random, g: torch.Generator, extra_rows: int):
    """The same rows packed among `extra_rows` random others: the pool grows by rows in front (the tables point
    past them), the tables and slots sit at other indices among others, and the rows are interleaved. Returns
    the packed case and where each original row went."""
    shift, Hk, D = 37, case["pool_k"].shape[1], case["pool_k"].shape[2]
    pool_k = torch.cat((torch.randn(shift, Hk, D, generator=g), case["pool_k"]))
    pool_v = torch.cat((torch.randn(shift, Hk, D, generator=g), case["pool_v"]))
    pool_pos = torch.cat((torch.randint(0, 40, (shift,), generator=g), case["pool_positions"]))
    tables = case["table"].shape[0]
    table = torch.cat((torch.randint(0, shift, (2, case["table"].shape[1]), generator=g, dtype=torch.int32),
                       case["table"] + shift))
    count = torch.cat((torch.tensor([5, 0], dtype=torch.int32), case["table_count"]))
    slots, G = case["own_k"].shape[:2]
    own_k = torch.cat((torch.randn(3, G, Hk, D, generator=g), case["own_k"]))
    own_v = torch.cat((torch.randn(3, G, Hk, D, generator=g), case["own_v"]))
    own_pos = torch.cat((case["own_positions"][:1].repeat(3, 1), case["own_positions"]))
    N = case["q"].shape[0]
    total = N + extra_rows
    places = sorted(rng.sample(range(total), N))
    others = [i for i in range(total) if i not in places]
    q = torch.randn(total, *case["q"].shape[1:], generator=g)
    q[places] = case["q"]
    row_slot = torch.tensor([rng.randrange(slots + 3) for _ in range(total)], dtype=torch.int32)
    row_table = torch.tensor([rng.randrange(tables + 2) for _ in range(total)], dtype=torch.int32)
    row_own = torch.tensor([rng.randrange(1, G + 1) for _ in range(total)], dtype=torch.int32)
    positions = torch.randint(40, 40 + G, (total,), generator=g)
    row_slot[places], row_table[places] = case["row_slot"] + 3, case["row_table"] + 2
    row_own[places], positions[places] = case["row_own"], case["positions"]
    assert others or extra_rows == 0
    return dict(q=q, pool_k=pool_k, pool_v=pool_v, pool_positions=pool_pos, table=table, table_count=count,
                own_k=own_k, own_v=own_v, own_positions=own_pos, row_slot=row_slot, row_table=row_table,
                row_own=row_own, positions=positions), places


@pytest.mark.parametrize("window", [None, 12])
def test_a_row_is_the_same_alone_and_packed(window, seed):
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    case = random_case(rng, g, rows=3, heads=4, kv_heads=2, dim=16, pool=120, tables=2, slots=2, own=5)
    alone = kernel.decode_attention(**case, scale=0.25, window=window)
    packed_case, places = _moved(case, rng, g, extra_rows=6)
    packed = kernel.decode_attention(**packed_case, scale=0.25, window=window)[places]
    assert (alone - packed).abs().max() <= INVARIANCE_TOL, f"seed {seed}"
