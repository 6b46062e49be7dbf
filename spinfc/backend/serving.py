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

def cuda_dtype(configured: str) -> str:
    """The dtype a CUDA server runs in: bfloat16 where the setting is float32 (the CPU default; the Triton path is
    built for half precision), else the setting (bfloat16 or float16)."""
    return "bfloat16" if configured == "float32" else configured


def launch_shape(shapes: Shapes) -> LaunchShape:
    """The one launch shape of a CUDA server with these (fixed) pass shapes."""
    if not shapes.fixed:
        raise ValueError(f"a CUDA graph needs fixed pass shapes, not {shapes}: build them with Shapes.for_device")
    return LaunchShape(budget=shapes.budget, rows=shapes.answer_rows, reads=shapes.reads)


def graph_model(model, shape: LaunchShape) -> GraphedModel:
    """`model` (a stack on a CUDA device, built with ops=spinfc.backend.triton_ops) wrapped so each pass of `shape`
    replays a CUDA graph; returns once every kernel is compiled and the pass is captured. Slow (seconds): run it
    off the event loop, before the server reports ready."""
    graphed = GraphedModel(model, [shape])
    with torch.cuda.device(model.device):
        graphed.warm_up()
    return graphed
