"""`Shapes`: the fixed shapes of every pass, chosen once at start-up and handed to the passes, the scheduler, the
lowering and the CUDA graphs (one value, so they cannot disagree).

    budget        T  token rows per pass (--token-budget)
    block            every content starts at a multiple of it (so its rows, and its results, do not depend on
                     where it lands: the kernels' batch invariance); a prompt of a prompt pass at `prompt_block`
    answer_rows   R  answer rows each launch gathers before the LM head, fixed on CUDA (None: as many as used)
    reads         N  log-probabilities each launch returns, fixed on CUDA (None: as many as used)
    trim             launch only the blocks a pass uses (the CPU, where a padding row costs as much as a used one)
    sizes            on CUDA, the row counts a pass may launch with, ascending, the budget last (--pass-sizes): a
                     pass launches at the smallest that holds it, with budget / 8 answer rows and as many reads as
                     rows (the full size: `answer_rows`, `reads`), each size one captured CUDA graph
    largest          the most rows one pass may hold: the budget where shapes are fixed; trimmed (the CPU), a content
                     whose rows with its questions are more than the budget runs alone in a pass of its own length,
                     up to this many rows (`for_device`: LONE_PASS_ROWS), so a content at the max_content_tokens
                     limit, or one question of 255 options, runs at the default budget instead of being refused

On CUDA the kernels need more of these numbers than the CPU does: `for_device` checks them against the kernels'
constants and refuses, naming the flag to change, a shape the kernels cannot run invariantly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

# The tree-attention kernel's content alignment (spinfc.backend.kernels.tree_attention.ALIGNMENT) and the row
# multiple of a CUDA pass (its query block, rounded up). Repeated here so the compiler needs no Triton; a test
# checks they agree with the kernels'.
KERNEL_ALIGNMENT = 64
CUDA_ROW_MULTIPLE = 128
# answer rows per pass on CUDA, as a fraction of the budget: the LM head runs on this many rows (padded) in every
# pass, so it stays small next to the pass (at most ~1% of its matmuls at Llama-3-8B's vocabulary over hidden size)
CUDA_ROWS_FRACTION = 8
# launch sizes per CUDA pass by default: the budget split in quarters. A pass costs what its size costs, so a pass
# that only part fills (the tail of a job, the first request of a burst) runs at a fraction of a full one.
CUDA_PASS_SIZES = 4
# The longest pass a content alone may take where passes are trimmed (the CPU): what one CUDA pass holds by default.
# Packing still fills passes of the budget; only a content that does not fit one runs in a pass of its own, at its
# own length (nothing is compiled per shape on the CPU, and a pass costs about its rows there: attention reads only
# the keys each block of rows can see).
LONE_PASS_ROWS = 16384


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def used_rows(lengths: Sequence[int], block: int) -> int:
    """The rows segments of `lengths` take in one pass, each at the next multiple of `block`: the last one's stop."""
    used = 0
    for length in lengths:
        used = round_up(used, block) + length
    return used


class ShapeError(ValueError):
    """A shape the kernels cannot run: the message names the setting and the values that would work."""


@attrs.frozen
class Shapes:
    budget: int = 16384
    block: int = 128
    answer_rows: int | None = None
    reads: int | None = None
    trim: bool = False
    sizes: tuple[int, ...] = ()  # () : the budget alone
    largest: int = attrs.field(default=attrs.Factory(lambda self: self.budget, takes_self=True))

    def __attrs_post_init__(self) -> None:
        if self.block < 1 or self.budget < self.block or self.budget % self.block:
            raise ShapeError(f"the token budget {self.budget:,} is not a positive multiple of the block {self.block}: "
                             f"set --token-budget to a multiple of {max(self.block, 1)} (default 16384)")
        if self.largest < self.budget or self.largest % self.block or (self.largest > self.budget and not self.trim):
            raise ValueError(f"the largest pass {self.largest} must be the budget {self.budget}, or more (a multiple "
                             f"of the block {self.block}) only where passes are trimmed")
        if self.sizes and (list(self.sizes) != sorted(set(self.sizes)) or self.sizes[-1] != self.budget
                           or any(size % self.block for size in self.sizes)):
            raise ValueError(f"pass sizes {self.sizes} must ascend to the budget {self.budget} in multiples of the "
                             f"block {self.block}")

    @classmethod
    def for_settings(cls, settings) -> "Shapes":
        """The shapes an engine of `settings` (spinfc.config.EngineSettings) runs: `for_device` on its resolved
        device, budget (the device's default where none is set), block and pass sizes. Every caller that builds an
        engine or reports its shapes before it starts comes here (runtime/start.py, the server, `spinfc compile`)."""
        return cls.for_device(settings.resolved_device(), settings.resolved_budget(), settings.block,
                              settings.pass_sizes)

    @classmethod
    def for_device(cls, device: str, budget: int, block: int = 128, sizes: int = CUDA_PASS_SIZES) -> "Shapes":
        """The shapes a server (or `spinfc compile --device`) on `device` runs: on CUDA passes of `sizes` row counts
        (the budget's k / sizes, k = 1..sizes, each a multiple of 128) with fixed answer rows (rows / 8) and reads
        (rows); elsewhere passes trimmed to the blocks they use."""
        if not str(device).startswith("cuda"):
            return cls(budget=budget, block=block, trim=True, largest=max(budget, round_up(LONE_PASS_ROWS, block)))
        if sizes < 1:
            raise ShapeError(f"--pass-sizes {sizes}: give at least 1 (the budget alone)")
        if block % KERNEL_ALIGNMENT:
            raise ShapeError(f"--block {block} is not a multiple of {KERNEL_ALIGNMENT}, the content alignment the "
                             f"CUDA attention kernel needs for batch invariance: set --block {KERNEL_ALIGNMENT} or "
                             f"{2 * KERNEL_ALIGNMENT}")
        if budget % CUDA_ROW_MULTIPLE:
            low = max(CUDA_ROW_MULTIPLE, budget // CUDA_ROW_MULTIPLE * CUDA_ROW_MULTIPLE)
            raise ShapeError(f"--token-budget {budget} is not a multiple of {CUDA_ROW_MULTIPLE}, which the CUDA "
                             f"kernels need: set --token-budget {low} or {low + CUDA_ROW_MULTIPLE}")
        multiple = math.lcm(CUDA_ROW_MULTIPLE, block)  # a multiple of the kernels' row multiple and of the block
        steps = sorted({-(-budget * k // sizes // multiple) * multiple for k in range(1, sizes + 1)} - {0})
        return cls(budget=budget, block=block, answer_rows=budget // CUDA_ROWS_FRACTION, reads=budget, trim=False,
                   sizes=tuple(min(step, budget) for step in steps if step < budget) + (budget,))

    def launch_sizes(self) -> tuple[tuple[int, int, int], ...]:
        """Every launch shape (rows, answer rows, reads) of fixed shapes, smallest first; the last is the full pass."""
        if not self.fixed:
            raise ValueError(f"launch shapes are fixed only on CUDA, not for {self}: build them with Shapes.for_device")
        sizes = self.sizes or (self.budget,)
        return tuple((T, T // CUDA_ROWS_FRACTION, T) for T in sizes[:-1]) + ((self.budget, self.answer_rows,
                                                                             self.reads),)

    def launch_for(self, rows: int, answer_rows: int, reads: int) -> tuple[int, int, int]:
        """(T, R, N) a pass using `rows` rows (its last segment's stop), `answer_rows` and `reads` launches with:
        the smallest launch size holding all three where shapes are fixed; else the used rows rounded up to the
        block (trimmed: up to `largest`, a content alone over the budget) or the budget, and the counts as they
        are."""
        if not self.fixed:
            T = min(self.largest, round_up(max(rows, 1), self.block)) if self.trim else self.budget
            return T, answer_rows, reads
        for T, R, N in self.launch_sizes():
            if rows <= T and answer_rows <= R and reads <= N:
                return T, R, N
        raise ValueError(f"a pass of {rows} rows, {answer_rows} answer rows and {reads} reads does not fit {self}")

    def with_sizes(self, sizes: tuple[int, ...]) -> "Shapes":
        """The same shapes launching only `sizes` (those a device checked: `backend.serving.graph_model`)."""
        return attrs.evolve(self, sizes=tuple(sizes))

    @property
    def prompt_block(self) -> int:
        """Where a prompt may start in a prompt-logprobs pass (/v1/completions' echo, runtime/launch/prompt_logprobs):
        at any row where passes are trimmed (the CPU, where a padding row costs a used row's time and no kernel
        needs an alignment: a thousand prompts of 15 tokens take 15,000 rows, not 128,000), at the block elsewhere
        (the CUDA tree-attention kernel's alignment)."""
        return 1 if self.trim else self.block

    @property
    def fixed(self) -> bool:
        """Every launch has one shape (budget, answer_rows, reads): what a CUDA graph replays."""
        return self.answer_rows is not None and self.reads is not None and not self.trim

    def __str__(self) -> str:
        fixed = f", {self.answer_rows} answer rows, {self.reads} reads" if self.answer_rows is not None else ""
        sizes = f" (launched at {', '.join(map(str, self.sizes))} rows)" if len(self.sizes) > 1 else ""
        alone = f", up to {self.largest} for a content alone" if self.largest > self.budget else ""
        return f"{self.budget} rows per pass{sizes}{alone}, contents at multiples of {self.block}{fixed}"
