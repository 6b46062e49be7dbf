"""How a server runs a model on CUDA: the Triton ops in bf16, one fixed launch shape, each pass replayed from a
CUDA graph captured at start-up.

The engine launches every pass at the full budget (no trimming) with the answer rows and reads padded to fixed
counts, so one `LaunchShape` covers every request; `graph_model` compiles every kernel of that shape and captures
the pass before the server reports ready, and nothing is compiled per request afterwards.
"""

from __future__ import annotations

import torch

from spinfc.backend.graphs import GraphedModel, LaunchShape

# Every pass's row count must be a multiple of this: the tree attention's query block (and the content alignment).
ROW_MULTIPLE = 128
# Answer rows per pass, as a fraction of the budget: the LM head runs on this many rows (padded) in every pass,
# so it is kept small next to the pass (1/8 of the rows: at most ~1% of a pass's matmuls at Llama-3-8B's vocabulary
# over hidden size); a content whose questions need more answer rows than this is refused as too long.
ROWS_FRACTION = 8


def cuda_dtype(configured: str | None) -> str:
    """The dtype of a CUDA server's matmuls: the setting as given (an explicit float32 is served in float32), or
    bfloat16 where none was set."""
    return configured or "bfloat16"


def launch_shape(budget: int) -> LaunchShape:
    """The one launch shape of a CUDA server with `budget` rows per pass: budget // 8 answer rows and `budget`
    reads (a read is one float; many options can share an answer row). Raises ValueError for a budget that is not
    a multiple of ROW_MULTIPLE, saying what to set instead."""
    if budget % ROW_MULTIPLE:
        low = max(ROW_MULTIPLE, budget // ROW_MULTIPLE * ROW_MULTIPLE)
        raise ValueError(f"token_budget {budget} is not a multiple of {ROW_MULTIPLE}, which the CUDA kernels need: "
                         f"set --token-budget {low} or {low + ROW_MULTIPLE}")
    return LaunchShape(budget=budget, rows=budget // ROWS_FRACTION, reads=budget)


def graph_model(model, shape: LaunchShape) -> GraphedModel:
    """`model` (a stack on a CUDA device, built with ops=spinfc.backend.triton_ops) wrapped so each pass of `shape`
    replays a CUDA graph; returns once every kernel is compiled and the pass is captured. Slow (seconds): run it
    off the event loop, before the server reports ready."""
    from spinfc.backend.invariance import check_row_invariance

    graphed = GraphedModel(model, [shape])
    with torch.cuda.device(model.device):
        check_row_invariance(model, shape.budget, shape.rows)  # refuses the start where a GEMM is not
        graphed.warm_up()
    return graphed


def engine_options(shape: LaunchShape) -> dict:
    """The Engine keyword arguments that make every pass `shape`: full passes (no trimming), fixed answer counts."""
    return {"max_rows": shape.rows, "max_reads": shape.reads, "trim": False}
