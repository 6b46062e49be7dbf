"""`Shapes`: the fixed shapes of every pass, chosen once at start-up and handed to the passes, the scheduler, the
lowering and the CUDA graphs (one value, so they cannot disagree).

    budget        T  token rows per pass (--token-budget)
    block            every content starts at a multiple of it (so its rows, and its results, do not depend on
                     where it lands: the kernels' batch invariance)
    answer_rows   R  answer rows each launch gathers before the LM head, fixed on CUDA (None: as many as used)
    reads         N  log-probabilities each launch returns, fixed on CUDA (None: as many as used)
    trim             launch only the blocks a pass uses (the CPU, where a padding row costs as much as a used one)

On CUDA the kernels need more of these numbers than the CPU does: `for_device` checks them against the kernels'
constants and refuses, naming the flag to change, a shape the kernels cannot run invariantly.
"""

from __future__ import annotations

import attrs

# The tree-attention kernel's content alignment (spinfc.backend.kernels.tree_attention.ALIGNMENT) and the row
# multiple of a CUDA pass (its query block, rounded up). Repeated here so the compiler needs no Triton; a test
# checks they agree with the kernels'.
KERNEL_ALIGNMENT = 64
CUDA_ROW_MULTIPLE = 128
# answer rows per pass on CUDA, as a fraction of the budget: the LM head runs on this many rows (padded) in every
# pass, so it stays small next to the pass (at most ~1% of its matmuls at Llama-3-8B's vocabulary over hidden size)
CUDA_ROWS_FRACTION = 8


class ShapeError(ValueError):
    """A shape the kernels cannot run: the message names the setting and the values that would work."""


@attrs.frozen
class Shapes:
    budget: int = 16384
    block: int = 128
    answer_rows: int | None = None
    reads: int | None = None
    trim: bool = False

    def __attrs_post_init__(self) -> None:
        if self.block < 1 or self.budget < self.block or self.budget % self.block:
            raise ShapeError(f"the token budget {self.budget:,} is not a positive multiple of the block {self.block}: "
                             f"set --token-budget to a multiple of {max(self.block, 1)} (default 16384)")

    @classmethod
    def for_device(cls, device: str, budget: int, block: int = 128) -> "Shapes":
        """The shapes a server (or `spinfc compile --device`) on `device` runs: on CUDA full passes of `budget` rows
        with fixed answer rows (budget / 8) and reads (budget); elsewhere passes trimmed to the blocks they use."""
        if not str(device).startswith("cuda"):
            return cls(budget=budget, block=block, trim=True)
        if block % KERNEL_ALIGNMENT:
            raise ShapeError(f"--block {block} is not a multiple of {KERNEL_ALIGNMENT}, the content alignment the "
                             f"CUDA attention kernel needs for batch invariance: set --block {KERNEL_ALIGNMENT} or "
                             f"{2 * KERNEL_ALIGNMENT}")
        if budget % CUDA_ROW_MULTIPLE:
            low = max(CUDA_ROW_MULTIPLE, budget // CUDA_ROW_MULTIPLE * CUDA_ROW_MULTIPLE)
            raise ShapeError(f"--token-budget {budget} is not a multiple of {CUDA_ROW_MULTIPLE}, which the CUDA "
                             f"kernels need: set --token-budget {low} or {low + CUDA_ROW_MULTIPLE}")
        return cls(budget=budget, block=block, answer_rows=budget // CUDA_ROWS_FRACTION, reads=budget, trim=False)

    @property
    def fixed(self) -> bool:
        """Every launch has one shape (budget, answer_rows, reads): what a CUDA graph replays."""
        return self.answer_rows is not None and self.reads is not None and not self.trim

    def __str__(self) -> str:
        fixed = f", {self.answer_rows} answer rows, {self.reads} reads" if self.answer_rows is not None else ""
        return f"{self.budget} rows per pass, contents at multiples of {self.block}{fixed}"
