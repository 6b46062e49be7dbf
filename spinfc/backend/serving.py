"""How a server runs a model on CUDA: the Triton ops in half precision (fp16 around a float32 residual stream by
default, `CUDA_DTYPE`), a few fixed launch shapes, each pass replayed from a CUDA graph captured at start-up.

The engine launches every pass at one of its `Shapes`' launch sizes (`Shapes.launch_sizes`: by default the budget's
quarters, each with rows / 8 answer rows and as many reads as rows), the smallest that holds the pass, as its
scheduler decides (runtime/schedule/scheduler.py); nothing here picks a size. `graph_model` checks every GEMM of every size
for row invariance, compiles every kernel of the sizes that pass and captures one graph per size before the server
reports ready (the shapes it returns launch only those); nothing is compiled per request afterwards.
"""

from __future__ import annotations

import logging

import torch

from spinfc.backend.graphs import GraphedModel, LaunchShape
from spinfc.backend.invariance import invariant_sizes
from spinfc.shapes import Shapes

log = logging.getLogger("spinfc.serving")


# The CUDA default: float16 matmuls around a float32 residual stream (`--precision mixed`). Measured on an H200 with
# the packaged SmolLM2 served on CUDA: 0.020 from float32 in logprob on held-out requests, against bfloat16's 0.115
# (the bound is 0.05), for 1.7% more time than bf16-mixed on the 8B job (benchmarks/NOTES.md).
CUDA_DTYPE = "float16"


def cuda_dtype(configured: str | None) -> str:
    """The dtype of a CUDA server's matmuls: the setting as given (an explicit float32 is served in float32), or
    CUDA_DTYPE where none was set."""
    return configured or CUDA_DTYPE


def launch_shapes(shapes: Shapes) -> list[LaunchShape]:
    """The launch shapes of a CUDA server with these (fixed) pass shapes, smallest first."""
    if not shapes.fixed:
        raise ValueError(f"a CUDA graph needs fixed pass shapes, not {shapes}: build them with Shapes.for_device")
    return [LaunchShape(*size) for size in shapes.launch_sizes()]


def graph_model(model, shapes: Shapes) -> tuple[GraphedModel, Shapes]:
    """`model` (a stack on a CUDA device, built with ops=spinfc.backend.triton_ops) wrapped so each pass replays the
    CUDA graph of its launch size, and the shapes to run it with: `shapes` less any smaller size whose products are
    not row invariant on this GPU (logged; the full budget must be, or the start fails). Returns once every kernel
    is compiled and every size captured. Slow (seconds): run it off the event loop, before the server reports
    ready."""
    with torch.cuda.device(model.device):
        sizes = invariant_sizes(model, shapes.launch_sizes())  # raises where the full pass is not invariant
        if len(sizes) < len(shapes.launch_sizes()):
            log.warning("pass sizes %s are not row invariant on this GPU and are not used; passes launch at %s rows",
                        sorted(set(shapes.sizes) - {s[0] for s in sizes}), [s[0] for s in sizes])
        checked = shapes.with_sizes(tuple(T for T, _, _ in sizes))
        # a stack whose forward reads the pass on the host (Qwen3.5's recurrence segments) runs eagerly; a captured
        # stack whose content cache can be filled (keys and values are all a content leaves: no recurrent layer)
        # also captures each size recording its keys and values (`graphs.GraphedModel.forward_recording`)
        capture = getattr(model, "CAPTURABLE", True)
        record = capture and getattr(model, "attention_layers", model.config.layers) == model.config.layers
        graphed = GraphedModel(model, launch_shapes(checked), capture=capture, record=record)
        graphed.warm_up()
    return graphed, checked
