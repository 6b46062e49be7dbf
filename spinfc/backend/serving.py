"""How a server runs a model on CUDA: the Triton ops in bf16, one fixed launch shape, each pass replayed from a
CUDA graph captured at start-up.

The engine launches every pass at the full budget (no trimming) with the answer rows and reads padded to the fixed
counts of its `Shapes` (`Shapes.for_device`), so one `LaunchShape` covers every request; `graph_model` compiles every kernel of that shape and captures
the pass before the server reports ready, and nothing is compiled per request afterwards.
"""

from __future__ import annotations

import torch

from spinfc.backend.graphs import GraphedModel, LaunchShape
from spinfc.shapes import Shapes

def cuda_dtype(configured: str | None) -> str:
    """The dtype of a CUDA server's matmuls: the setting as given (an explicit float32 is served in float32), or
    bfloat16 where none was set."""
    return configured or "bfloat16"


def launch_shape(shapes: Shapes) -> LaunchShape:
    """The one launch shape of a CUDA server with these (fixed) pass shapes."""
    if not shapes.fixed:
        raise ValueError(f"a CUDA graph needs fixed pass shapes, not {shapes}: build them with Shapes.for_device")
    return LaunchShape(budget=shapes.budget, rows=shapes.answer_rows, reads=shapes.reads)


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
