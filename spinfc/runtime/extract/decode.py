"""The decode loop: every walker's beams in one `DecodeBatch`, one model launch per step for all of them.

    walk(model, pool, starts)   starts: per walker, (walker, the pool rows its prompt sees, prompt token, position)

Searched and sampled walkers step together: each step feeds every live beam its next token, builds each beam's
token mask on the host (xgrammar, while the device runs the step), and on the device masks the log-probabilities,
adds each beam's own and takes every row's best `TOP_K`: only those ([rows, TOP_K] values and tokens) come back to
the host, where each walker says which beams go on (beams.py) and the batch keeps those slots (`select`). Forced
walkers (answers read on the floor) need no decisions: every token of every answer is fed at once, as rows packed
into as few launches as they fill, each row seeing its answer's earlier rows.

A walker's beams see the same pool rows (its prompt's table) and their own slots, so walkers on different contents
and of different kinds share launches without seeing one another. On CUDA every launch has `fixed.launch_rows` rows
(128); more beams than that are walked in groups that each fit. On the CPU a group's slots hold at most
`budget.DECODE_MEMORY_BYTES` (its beams' own keys and values): a request's decode memory is bounded whatever it
asks, and a walker that alone cannot fit is refused when its request compiles (`budget.check_fits`).

`walking` is the same walk one launch at a time (a generator that yields after each): the engine runs a pass's
decode in slices between scoring passes and other passes' decodes, and a walker whose `live()` turns false (its
client left) is dropped at the next step. Decodes that take turns share one `budget.DecodeMemory`: a group waits
(yields WAITING) until its beams' bytes are free.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import attrs
import torch
import xgrammar

from spinfc.runtime.extract import budget
from spinfc.runtime.extract.beams import Forced, Part, Search
from spinfc.runtime.extract.fixed import launch_rows, slot_tokens
from spinfc.runtime.extract.kv import KeyPool
from spinfc.runtime.extract.recurrent import batch_class, is_recurrent

# Candidates per row copied back each step (a search of width w reads about 2w of them; more are fetched whole
# only when too many are invalid). Fixed, so the device's top-k is one shape.
TOP_K = 32
AUTO = object()
WAITING = "waiting for decode memory"  # what `walking` yields for a turn in which it could not launch


@attrs.frozen
class Start:
    walker: object  # beams.Search | beams.Sample | beams.Forced
    rows: torch.Tensor  # [L] int64: the pool rows the prompt's last token sees
    token: int  # the prompt's last token (run again: its output starts the answer)
    position: int
    max_tokens: int  # the most tokens a beam of this walker is fed
    live: Callable[[], bool] | None = None  # false once nobody wants the walker's answer: dropped at the next step


@attrs.define
class WalkStats:
    steps: int = 0  # model launches
    beam_rows: int = 0  # rows fed over all launches (beams, or answer tokens read): the decode's cost in rows


# torch threads on the CPU while decoding (as for chat generation, runtime/launch/generate.py): a step is a few hundred
# small ops, and waking a thread pool for each costs more than it saves, far more on busy cores.
DECODE_THREADS = 1


def walk(model, pool: KeyPool, starts: Sequence[Start], rows=AUTO) -> WalkStats:
    """Run every walker to its end; returns how many launches and rows it took. `rows`: every launch's row count
    (default: `fixed.launch_rows` on CUDA, on the CPU each launch its own rows)."""
    steps = walking(model, pool, starts, rows)
    with decode_threads(pool.positions.device.type == "cpu"):
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value


@contextlib.contextmanager
def decode_threads(on_cpu: bool) -> Iterator[None]:
    """DECODE_THREADS torch threads while the block runs, on the CPU (the caller's setting back after)."""
    threads = torch.get_num_threads()
    if on_cpu:
        torch.set_num_threads(DECODE_THREADS)
    try:
        yield
    finally:
        if on_cpu:
            torch.set_num_threads(threads)


def walking(model, pool: KeyPool, starts: Sequence[Start], rows=AUTO, memory: budget.DecodeMemory | None = None):
    """`walk` as a generator: yields after each launch, returns (StopIteration's value) the WalkStats. Run it
    inside `decode_threads`. With `memory` (shared by decodes that take turns), each group of an eager walk takes its
    beams' bytes before its batch is made: while they are not free it yields WAITING instead of launching."""
    stats = WalkStats()
    if not starts:
        return stats
    on_cpu = pool.positions.device.type == "cpu"
    if rows is AUTO:
        rows = None if on_cpu or is_recurrent(model) else launch_rows(model)
    stepped = [s for s in starts if not isinstance(s.walker, Forced)]
    forced = [s for s in starts if isinstance(s.walker, Forced) and s.walker.answers]
    tokens = max([s.max_tokens for s in starts])
    limit = rows if rows is not None else budget.slots_within(model, tokens)
    if rows is not None:
        memory = None  # fixed launches run in the device's fixed buffers (fixed.py), not in batches of their own
    for walk_group, slots in ((_step, lambda s: s.walker.width), (_read, lambda s: len(s.walker.answers))):
        for group in _groups(stepped if walk_group is _step else forced, slots, limit):
            group = [s for s in group if _live(s)]
            if not group:
                continue
            size = sum(map(slots, group)) * budget.slot_bytes(model, tokens) if memory is not None else 0
            while size and not memory.take(size):
                yield WAITING  # the memory is held by other decodes' groups: the engine turns to them
            try:
                yield from walk_group(model, pool, group, rows, stats)
            finally:  # also when the walk is closed (withdrawn, or the engine stops)
                if size:
                    memory.give(size)
    return stats


def _live(start: Start) -> bool:
    return start.live is None or start.live()


def _groups(starts: list[Start], slots, limit: int | None) -> list[list[Start]]:
    """Consecutive groups whose slots fit `limit` (one group without a limit), each at most `limit` walkers."""
    if limit is None:
        return [starts] if starts else []
    groups, current, used = [], [], 0
    for start in starts:
        need = slots(start)
        if need > limit:
            raise ValueError(f"a walker needs {need} beams at once, more than a decode launch's {limit} slots "
                             "hold: lower the slot's beam_width or max_tokens")
        if used + need > limit or len(current) >= limit:
            groups.append(current)
            current, used = [], 0
        current.append(start)
        used += need
    return groups + [current] if current else groups


def _step(model, pool: KeyPool, starts: list[Start], rows: int | None, stats: WalkStats) -> Iterator[None]:
    """Searched and sampled walkers, step by step (the module docstring)."""
    walkers = [s.walker for s in starts]
    batch = batch_class(model)(model, pool, [s.rows for s in starts], sum(w.width for w in walkers),
                        slot_tokens(max(s.max_tokens for s in starts) + 1), rows)
    grammars = next((w.grammars for w in walkers if isinstance(w, Search)), None)
    owners = list(range(len(starts)))  # row -> walker; a walker's rows are consecutive
    tokens = [s.token for s in starts]
    step = 0
    while owners:
        n = len(owners)
        inputs = torch.tensor([tokens, [starts[w].position + step for w in owners], list(range(n)), owners,
                               [step + 1] * n], dtype=torch.int64)
        logprobs = batch.run(inputs)  # on CUDA, the device runs this while the host builds the masks
        bitmask, beam_logprobs = _constraints(walkers, owners, int(logprobs.shape[0]), logprobs.shape[1], grammars)
        values, top, totals = _best(logprobs, bitmask, beam_logprobs)
        stats.steps += 1
        stats.beam_rows += n
        keep, next_owners, next_tokens = [], [], []
        first = 0
        while first < n:
            walker = owners[first]
            last = first
            while last < n and owners[last] == walker:
                last += 1
            part = Part(values[first:last], top[first:last], int(logprobs.shape[1]),
                        lambda a=first, b=last: totals[a:b].cpu())
            for parent, token in walkers[walker].advance(part) if _live(starts[walker]) else ():
                keep.append(first + parent)
                next_owners.append(walker)
                next_tokens.append(token)
            first = last
        if not keep:
            break
        batch.select(keep, step + 1)
        owners, tokens = next_owners, next_tokens
        step += 1
        yield  # a step done: the engine may run a scoring pass before the next


def _constraints(walkers, owners: list[int], rows: int, vocab: int, grammars):
    """The step's token masks ([rows, ceil(V / 32)] int32, all allowed where no grammar applies: sampled rows,
    padding) and each row's beam log-probability ([rows] float32), on the host."""
    bitmask = torch.full(xgrammar.get_bitmask_shape(rows, vocab), -1, dtype=torch.int32)
    beam_logprobs = torch.zeros(rows, dtype=torch.float32)
    constrained, matchers, endings = [], [], []
    row, previous = 0, None
    for walker in owners:
        if walker == previous:
            continue
        previous = walker
        for matcher, logprob in walkers[walker].rows():
            beam_logprobs[row] = logprob
            if matcher is not None:
                constrained.append(row)
                matchers.append(matcher)
                endings.append(walkers[walker].ending_mask)
            row += 1
    if matchers:
        grammars.fill(matchers, bitmask, constrained)
        bitmask.numpy()[constrained] |= torch.stack(endings).numpy()
    return bitmask, beam_logprobs


def _best(logprobs: torch.Tensor, bitmask: torch.Tensor, beam_logprobs: torch.Tensor):
    """On the logprobs' device: mask them (in place), add each row's beam log-probability, take each row's best
    TOP_K. -> (values [rows, k] float32 and tokens [rows, k] int64 as NumPy arrays, the totals on the device)."""
    device = logprobs.device
    xgrammar.apply_token_bitmask_inplace(logprobs, bitmask.to(device, non_blocking=True))
    totals = logprobs + beam_logprobs.to(device, non_blocking=True)[:, None]
    values, top = torch.topk(totals, min(TOP_K, totals.shape[1]), dim=-1)
    return values.cpu().numpy(), top.cpu().numpy(), totals


def _read(model, pool: KeyPool, starts: list[Start], rows: int | None, stats: WalkStats) -> Iterator[None]:
    """Forced walkers: every answer's tokens fed at once (the module docstring); each answer a slot whose row t
    (the prompt's last token, then the answer's tokens) reads the log-probability of the answer's token t."""
    answers = [(w, a) for w, s in enumerate(starts) for a in range(len(s.walker.answers))]
    longest = max(len(starts[w].walker.answers[a]) for w, a in answers)
    batch = batch_class(model)(model, pool, [s.rows for s in starts], len(answers), slot_tokens(longest), rows)
    feed = []  # (token, position, slot, table, own, wanted token, walker, answer)
    for slot, (w, a) in enumerate(answers):
        start, tokens = starts[w], starts[w].walker.answers[a]
        for t, wanted in enumerate(tokens):
            feed.append((tokens[t - 1] if t else start.token, start.position + t, slot, w, t + 1, wanted, w, a))
    chunk = rows or len(feed)
    for first in range(0, len(feed), chunk):
        part = feed[first:first + chunk]
        inputs = torch.tensor([[f[i] for f in part] for i in range(5)], dtype=torch.int64)
        logprobs = batch.run(inputs)
        yield
        wanted = torch.tensor([f[5] for f in part], dtype=torch.int64).to(logprobs.device)
        read = logprobs[:len(part)].gather(1, wanted[:, None])[:, 0].cpu().tolist()
        stats.steps += 1
        stats.beam_rows += len(part)
        for f, value in zip(part, read):  # in token order within each answer, as a step-by-step read adds them
            starts[f[6]].walker.logprobs[f[7]] += value
    for start in starts:
        start.walker.done = True
