"""Fixed-shape launches on CUDA: buffers allocated once per launch shape, every Triton kernel compiled at warm-up,
and each pass replayed from a CUDA graph.

A `LaunchShape` is (budget, rows, reads): the pass's row count and the fixed counts of answer rows and reads it
is lowered with (`launch.lower(layout, rows_padded_to=rows, reads_padded_to=reads)`). For each shape,
`GraphedModel.warm_up` runs the model's forward twice on an all-padding launch held in static buffers (this
compiles every kernel the shape needs and lets cuBLAS pick its algorithms), then captures one forward into a
CUDA graph. A pass then costs one copy into the static buffers (they are views of one buffer, `launch.packed`, as
the runner's pinned staging buffers are) and one graph replay: no Python per layer, no launch gaps, nothing
compiled per request, and few calls that give up the GIL. Graphs of all shapes share one memory pool (they never
run at the same time).

With `record` (a stack whose content cache may be filled: `serving.graph_model`), each shape is captured a second
time as a recording forward (`kv_record.recording`): the same pass that also writes every attention layer's keys
and values into static buffers (`kv_record.KVBuffers`, one set for the largest shape), so a pass that fills the
content cache replays a graph too (`forward_recording`).

Only a stack whose ops read nothing from the host can be captured: the Triton ops (`backend.triton_ops`) qualify;
the reference's `tree_attention` loops over `launch.spans` in Python, so a model on the reference runs eagerly
(`capture=False`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, NamedTuple

import torch

from spinfc.backend import reference
from spinfc.backend.kv_record import KVBuffers, recording
from spinfc.backend.launch import Launch, MediaRows, packed, packed_bytes


class LaunchShape(NamedTuple):
    budget: int  # rows of the pass (T)
    rows: int  # answer rows, padded (R)
    reads: int  # reads, padded (N)

    @classmethod
    def of(cls, launch: Launch) -> "LaunchShape":
        return cls(launch.budget, int(launch.rows.shape[0]), int(launch.read_row.shape[0]))


def padding_launch(shape: LaunchShape, device: torch.device | str) -> Launch:
    """A launch of `shape` whose every row is padding (ends[j] = j + 1), packed in one buffer (`launch.packed`): the
    static buffers' first contents."""
    T, R, N = shape
    launch = packed(torch.zeros(packed_bytes(T, R, N), dtype=torch.uint8, device=device), T, R, N)
    launch.ends.copy_(torch.arange(1, T + 1, dtype=torch.int32, device=device))
    return launch


class MediaInputs:
    """What a pass holding media adds to the static inputs, one set for every launch shape (passes never run at
    once; a shape uses the first T rows): the towers' embeddings placed at their rows (`placed` [T, D] in the
    residual's dtype, `mask` [T] bool) and `firsts` [T] int32 (image blocks attend both ways). The towers run
    before the replay (`embed(reads, device) -> [M, D]`: their batches are fixed, not captured); the text stack,
    embeddings as an input, is replayed from its own graph."""

    def __init__(self, embed: Callable, rows: int, width: int, dtype: torch.dtype, device: torch.device):
        self.embed = embed
        self.placed = torch.zeros((rows, width), dtype=dtype, device=device)
        self.mask = torch.zeros(rows, dtype=torch.bool, device=device)
        self.firsts = torch.arange(rows, dtype=torch.int32, device=device)
        self.arange = torch.arange(rows, dtype=torch.int32, device=device)

    def static(self, launch: Launch) -> Launch:
        """`launch` (a padding launch of T rows) with this set's first T rows as its media inputs."""
        T = launch.budget
        media = MediaRows(torch.zeros(0, dtype=torch.int64, device=self.mask.device), (), self.placed[:T],
                          self.mask[:T])
        return dataclasses.replace(launch, media=media, firsts=self.firsts[:T])

    def fill(self, launch: Launch, T: int) -> None:
        """The towers' embeddings of `launch.media` at their rows, the rest unmasked; its `firsts` (or j)."""
        device = self.mask.device
        self.mask[:T].zero_()
        if launch.media is not None:
            rows = launch.media.rows.to(device, non_blocking=True)
            embeddings = self.embed(launch.media.reads, device)  # [M, D]
            self.placed.index_copy_(0, rows, embeddings.to(self.placed.dtype))
            self.mask.index_fill_(0, rows, True)
        source = launch.firsts if launch.firsts is not None else self.arange[:T]
        self.firsts[:T].copy_(source, non_blocking=True)


class GraphedPass:
    """One launch shape: static input buffers, and the forward captured over them (or run eagerly over them);
    with `media`, the shape's graph for passes holding media (their embeddings and `firsts` as inputs too)."""

    def __init__(self, forward: Callable[[Launch], torch.Tensor], shape: LaunchShape, device: torch.device,
                 capture: bool, pool=None, media: MediaInputs | None = None):
        self.forward, self.shape, self.capture, self.pool, self.media = forward, shape, capture, pool, media
        self.static = padding_launch(shape, device)
        if media is not None:
            self.static = media.static(self.static)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.output: torch.Tensor | None = None  # [N] float32, written by each replay
        self.record: Callable[[Launch], torch.Tensor] | None = None  # the recording forward (GraphedModel sets it)
        self.record_graph: torch.cuda.CUDAGraph | None = None
        self.record_output: torch.Tensor | None = None

    def warm_up(self) -> None:
        """Run eagerly twice (compiles kernels, warms cuBLAS), then capture one forward into a graph (and the
        recording forward into a second one, where one is set)."""
        self.graph, self.output = self._captured(self.forward)
        if self.record is not None:
            self.record_graph, self.record_output = self._captured(self.record)

    def _captured(self, forward) -> tuple[torch.cuda.CUDAGraph | None, torch.Tensor]:
        for _ in range(2):
            output = forward(self.static)
        torch.cuda.synchronize()
        if not self.capture:
            return None, output
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the documented warm-up on a side stream before capture
            forward(self.static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            output = forward(self.static)
        torch.cuda.synchronize()
        return graph, output

    def __call__(self, launch: Launch) -> torch.Tensor:
        """[N] float32 logprobs of `launch` (a fresh tensor: the next replay overwrites the graph's output). Its
        tensors are copied into the static buffers from wherever they are (pinned host memory: the runner's); a
        packed launch (`launch.block`) in one copy."""
        self._load(launch)
        if self.graph is None:  # eager over the static buffers, with this launch's spans (a host tuple, not in them)
            return self.forward(self._eager(launch)).clone()
        self.graph.replay()
        return self.output.clone()

    def recorded(self, launch: Launch) -> torch.Tensor:
        """As calling it, replaying the recording forward: the keys and values land in the model's `KVBuffers`."""
        self._load(launch)
        if self.record_graph is None:
            return self.record(self._eager(launch)).clone()
        self.record_graph.replay()
        return self.record_output.clone()

    def _eager(self, launch: Launch) -> Launch:
        """The static buffers as an eager forward reads them: this launch's spans (a host tuple, not in them), and
        the launch itself as their host copy where it is in host memory (what a recurrent stack plans from)."""
        on_host = launch.tokens.device.type == "cpu"
        return dataclasses.replace(self.static, spans=launch.spans, host=launch if on_host else launch.host)

    def _load(self, launch: Launch) -> None:
        s = self.static
        if launch.block is not None and launch.block.shape == s.block.shape:  # the same shape packs the same way
            s.block.copy_(launch.block, non_blocking=True)
        else:
            for target, source in ((s.tokens, launch.tokens), (s.positions, launch.positions), (s.ends, launch.ends),
                                   (s.rows, launch.rows), (s.read_row, launch.read_row),
                                   (s.read_token, launch.read_token)):
                target.copy_(source, non_blocking=True)
        if self.media is not None:
            self.media.fill(launch, self.shape[0])


class GraphedModel:
    """A drop-in for a model stack on CUDA: `forward(launch)` replays the graph of the launch's shape.

    Every shape a request can meet is given up front and compiled by `warm_up` (what a readiness check waits
    for); a launch of any other shape is refused rather than compiled on the fly. Other attributes (name,
    tokenizer, config, ...) are the wrapped model's."""

    copies_inputs = True  # forward copies a launch into its static buffers: the launch may be in (pinned) host memory

    def __init__(self, model, shapes: Iterable[LaunchShape], *, capture: bool = True, record: bool = False):
        self.model = model
        self.kv: KVBuffers | None = None  # the recording forwards' buffers (warm_up makes them, with `record`)
        self._record = record
        device = model.device
        if device.type != "cuda":
            raise ValueError(f"GraphedModel needs a model on a CUDA device, not {device}")
        if capture and getattr(model, "ops", None) is reference:
            raise ValueError("the reference ops read launch.spans on the host and cannot be captured in a CUDA "
                             "graph: build the model with ops=spinfc.backend.triton_ops, or pass capture=False")
        pool = torch.cuda.graph_pool_handle() if capture else None
        shapes = [LaunchShape(*shape) for shape in shapes]
        self.passes = {shape: GraphedPass(model.forward, shape, device, capture, pool) for shape in shapes}
        # a model with towers: each shape's graph for passes holding media too (the towers run before it); M-RoPE
        # passes (three positions a row) run eagerly, as does every pass of a stack that is not captured
        self.media_passes = {}
        towers = getattr(model, "towers", None)
        if capture and towers is not None:
            inputs = MediaInputs(towers.embed, max(shape[0] for shape in shapes), model.config.hidden,
                                 model.precision.residual, device)
            self.media_passes = {shape: GraphedPass(model.forward, shape, device, capture, pool, inputs)
                                 for shape in shapes}
        self.ready = False

    def warm_up(self) -> None:
        if self._record:  # (passes holding media record eagerly: `forward_recording`)
            shapes = sorted(self.passes)
            self.kv = KVBuffers.for_model(self.model, self.passes[shapes[0]].static, shapes[-1].budget)
            for shape, graphed in self.passes.items():
                keys, values = self.kv.views(shape.budget)
                graphed.record = lambda launch, keys=keys, values=values: recording(self.model, launch, keys, values)
        for graphed in [*self.passes.values(), *self.media_passes.values()]:
            graphed.warm_up()
        self.ready = True

    @property
    def records(self) -> bool:
        """Whether a pass that fills the content cache replays a graph (`forward_recording`)."""
        return self.kv is not None and self.ready

    def forward_recording(self, launch: Launch) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """(`forward(launch)`, every attention call's keys and values [T, Hk, D]): views of the static buffers,
        valid until the next recording pass is queued (read them in stream order before it, as the content cache's
        `store` clones them)."""
        if self.kv is None:
            raise RuntimeError("forward_recording on a GraphedModel built without record=True")
        T = launch.budget
        keys, values = self.kv.views(T)
        if launch.media is not None or launch.firsts is not None:  # eager, into the same buffers
            with torch.inference_mode():
                return recording(self.model, launch.to(self.model.device), keys, values), keys, values
        graphed = self._pass(launch, self.passes)
        with torch.inference_mode():
            return graphed.recorded(launch), keys, values

    def forward(self, launch: Launch) -> torch.Tensor:
        if launch.media is not None or launch.firsts is not None:
            if launch.rope_positions is not None or LaunchShape.of(launch) not in self.media_passes:
                with torch.inference_mode():  # M-RoPE passes, and a stack not captured, run eagerly
                    return self.model.forward(launch.to(self.model.device))
            graphed = self._pass(launch, self.media_passes)
        else:
            graphed = self._pass(launch, self.passes)
        with torch.inference_mode():
            return graphed(launch)

    def _pass(self, launch: Launch, passes: dict) -> GraphedPass:
        shape = LaunchShape.of(launch)
        graphed = passes.get(shape)
        if graphed is None:
            raise ValueError(f"a launch of shape {shape} was not warmed up (shapes: {sorted(self.passes)}): lower "
                             "passes with the budget and rows_padded_to/reads_padded_to the model was warmed up with")
        if not self.ready:
            raise RuntimeError("GraphedModel.forward before warm_up(): call warm_up() once at start-up")
        return graphed

    __call__ = forward

    def __getattr__(self, name: str):
        return getattr(self.model, name)
