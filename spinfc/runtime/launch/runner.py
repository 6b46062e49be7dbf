"""The runner: segments in, one forward pass, one log-probability per read out. It owns the host side of a pass.

    stage    the chosen segments written into preallocated host buffers (NumPy views of one pinned buffer on
             CUDA, packed as `launch.packed` lays a launch out), each at the next multiple of the block, padding
             elsewhere
    launch   model.forward on the staged pass (on CUDA a GraphedModel: one non_blocking copy of the packed buffer
             into the graph's inputs, and a replay): returns at once on CUDA, the output copied back into pinned
             memory behind it, with an event recorded
    collect  waits for that event: the pass's logprobs as a NumPy array, in segment order

On CUDA the engine stages and launches pass k+1 before it collects pass k, so the host's work (scheduling,
staging, results) overlaps the GPU's and the GPU waits for nothing but the copies. Two sets of host buffers
alternate: a set is written again only after the pass that read it was collected. On the CPU a pass runs when it
is launched (the reference ops are synchronous), with buffers trimmed to the blocks the pass uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import attrs
import numpy as np
import torch

from spinfc.backend.launch import Launch, MediaRows, packed, packed_bytes
from spinfc.passes.layout import pass_shape
from spinfc.runtime import extract
from spinfc.runtime.admit.segment_arrays import SegmentArrays, TreeArrays  # noqa: F401  (the runner's inputs)
from spinfc.runtime.launch.cached_rows import reading
from spinfc.shapes import Shapes, round_up


@attrs.define(eq=False)
class Pending:
    """A launched pass: its output (on the host once `event` fired), how many reads are real, and where each
    segment was placed (start rows, for the debug plan)."""

    output: torch.Tensor  # [N] float32 on the host (pinned on CUDA)
    reads: int
    starts: list[int]
    rows: int  # rows launched
    event: torch.cuda.Event | None = None
    slot: int = 0
    index: int = 0  # the engine's pass number
    started: float = 0.0  # when it was launched (perf_counter)
    kept: object = None  # extract.PassKV: the pass's keys and values, when it holds extraction questions
    recorded: tuple | None = None  # (keys, values) per layer [T, Hk, D], for the content cache (`cached_rows`)


FIELDS = ("tokens", "positions", "ends", "rows", "read_row", "read_token")


class _HostBuffers:
    """One set of staging buffers of the fixed shapes: a (pinned) byte buffer holding a packed launch of any launch
    size (`launch.packed`: one copy moves a pass's inputs), the output, and for each launch size the launch's views
    and their NumPy views, made once (staging then calls nothing that gives up the GIL)."""

    def __init__(self, shapes: Shapes, pin: bool) -> None:
        self.block = torch.empty(packed_bytes(shapes.budget, shapes.answer_rows, shapes.reads), dtype=torch.uint8,
                                 pin_memory=pin)
        self.output = torch.empty(shapes.reads, dtype=torch.float32, pin_memory=pin)
        self._sizes: dict[tuple[int, int, int], tuple] = {}
        for size in shapes.launch_sizes():
            self.at(*size)

    def at(self, T: int, R: int, N: int) -> tuple[Launch, dict[str, np.ndarray], torch.Tensor]:
        """The packed launch of shape (T, R, N) over this buffer, NumPy views of its tensors, and its output."""
        entry = self._sizes.get((T, R, N))
        if entry is None:
            launch = packed(self.block, T, R, N)
            entry = self._sizes[(T, R, N)] = (launch, {name: getattr(launch, name).numpy() for name in FIELDS},
                                              self.output[:N])
        return entry


class Runner:
    def __init__(self, model, shapes: Shapes, device: str = "cpu", pad: int = 0) -> None:
        """`model.forward(launch) -> [N] logprobs` (a stack, or a GraphedModel replaying the fixed shape on CUDA)."""
        self.model, self.shapes, self.device, self.pad = model, shapes, str(device), pad
        self.on_cuda = self.device.startswith("cuda")
        self.asynchronous = self.on_cuda  # launch returns before the pass has run
        # a GraphedModel copies the pinned staging buffers itself (into its graph's inputs); a plain stack on CUDA
        # is handed the launch moved to the device
        self._moves = self.on_cuda and not getattr(model, "copies_inputs", False)
        self._buffers: list[_HostBuffers] = []
        if shapes.fixed:
            self._buffers = [_HostBuffers(shapes, pin=self.on_cuda) for _ in range(2)]
        self._padding_ends = np.arange(1, shapes.largest + 1, dtype=np.int32)  # padding rows see only themselves
        self._next = 0

    def stage(self, arrays: Sequence[SegmentArrays]) -> tuple[Launch, Pending]:
        """The pass of `arrays` (in order, each at the next multiple of the block) as a Launch in host memory
        (pinned on CUDA, packed where the shapes are fixed)."""
        shapes = self.shapes
        starts, used = [], 0
        for a in arrays:
            start = round_up(used, shapes.block)
            starts.append(start)
            used = start + len(a.tokens)
        if used > (shapes.budget if len(arrays) > 1 else shapes.largest):  # a content alone may take `largest`
            raise ValueError(f"segments of {used} rows do not fit a pass of {shapes.budget}")
        R = sum(len(a.answer_rows) for a in arrays)
        N = sum(len(a.read_row) for a in arrays)
        T, R_launch, N_launch = pass_shape([len(a.tokens) for a in arrays], R, N, shapes)
        if shapes.fixed:  # the launch size's packed views of the staging buffers
            slot = self._next
            self._next ^= 1
            staged, views, output = self._buffers[slot].at(T, R_launch, N_launch)
        else:
            slot, staged = 0, None
            views = {"tokens": np.empty(T, np.int64), "positions": np.empty(T, np.int64),
                     "ends": np.empty(T, np.int32), "rows": np.empty(R, np.int64),
                     "read_row": np.empty(N, np.int64), "read_token": np.empty(N, np.int64)}
            output = torch.empty(N, dtype=torch.float32)
        tokens, positions, ends = views["tokens"], views["positions"], views["ends"]
        tokens[:T] = self.pad
        positions[:T] = 0
        ends[:T] = self._padding_ends[:T]
        rows, read_row, read_token = views["rows"], views["read_row"], views["read_token"]
        rows[:] = 0  # padding answer rows and reads score token 0 at row 0; they are dropped
        read_row[:] = 0
        read_token[:] = 0
        r = n = 0
        for a, start in zip(arrays, starts):
            stop = start + len(a.tokens)
            tokens[start:stop] = a.tokens
            positions[start:stop] = a.positions
            ends[start:stop] = a.ends + start
            rows[r:r + len(a.answer_rows)] = a.answer_rows + start
            read_row[n:n + len(a.read_row)] = a.read_row + r
            read_token[n:n + len(a.read_token)] = a.read_token
            r, n = r + len(a.answer_rows), n + len(a.read_row)
        spans = tuple((start, start + len(a.tokens)) for a, start in zip(arrays, starts))
        if staged is not None:
            launch = dataclasses.replace(staged, spans=spans)
        else:
            launch = Launch(spans=spans, **{name: torch.from_numpy(views[name]) for name in FIELDS})
        if any(a.media for a in arrays):
            launch = dataclasses.replace(launch, **_media_of(arrays, starts, positions[:T]))
        return launch, Pending(output=output, reads=n, starts=starts, rows=T, slot=slot)

    def launch(self, arrays: Sequence[SegmentArrays], cached: Sequence | None = None, record: bool = False) -> Pending:
        """Stage and run one pass; on CUDA returns once the pass and the copy back are queued. With `record` every
        layer's keys and values are kept in `Pending.recorded`: replayed from the launch size's recording graph where
        the model has one (`GraphedModel.forward_recording`: views of its static buffers, which the content cache's
        `store` clones behind this pass in stream order), else run eagerly on the plain stack. With `cached` (per
        segment a `content_cache.CachedContent` or None) the pass runs eagerly on the plain stack, the contents given
        read from the cache (`cached_rows`). A pass holding media runs eagerly on the plain stack too
        (GraphedModel.forward: its towers' forward is not captured)."""
        reads_cache = cached is not None and any(e is not None for e in cached)
        if reads_cache or (record and not getattr(self.model, "records", False)):
            return self.launch_keeping_kv(arrays, cached=cached, extraction=False)
        launch, pending = self.stage(arrays)
        if self._moves:
            launch = launch.to(self.device)
        with torch.inference_mode():
            if record:  # a captured recording pass: its keys and values in the model's static buffers
                out, keys, values = self.model.forward_recording(launch)
                pending.recorded = (keys, values)
            else:
                out = self.model.forward(launch)  # [N] float32 on the device
        if self.on_cuda:
            pending.output.copy_(out, non_blocking=True)
            pending.event = torch.cuda.Event()
            pending.event.record()
        else:
            pending.output = out.float()
        return pending

    def launch_keeping_kv(self, arrays: Sequence[SegmentArrays], prompt_rows: Sequence[Sequence[int]] = (),
                          cached: Sequence | None = None, extraction: bool = True) -> Pending:
        """Stage and run one pass eagerly on the plain stack, keeping every layer's keys and values (of the whole
        layout, cached rows included) for the extraction decode (`extract.PassKV`) and the content cache
        (`Pending.recorded`); returns once it has run. `prompt_rows`: per segment, its extraction prompts' last rows
        (from the segment's start), where a recurrent stack keeps its states. `cached` as for `launch`."""
        launch, pending = self.stage(arrays)
        if self.on_cuda:  # the plain stack reads its launch on the device
            launch = launch.to(self.device)
        run = reading(launch, pending.starts, cached) if cached is not None else launch
        state_rows = [start + row for start, rows in zip(pending.starts, prompt_rows) for row in rows]
        states: dict = {}
        with torch.inference_mode():
            out, keys, values = extract.forward_keeping_kv(self.model, run, state_rows, states)
        pending.output = out.float().cpu()
        pending.recorded = (keys, values)
        if not extraction:
            return pending
        spans = _Spans(launch.spans)
        pending.kept = extract.PassKV(launch.tokens.cpu(), launch.positions.cpu(), launch.ends.cpu(), tuple(keys),
                                      tuple(values), spans, states or None)
        return pending

    def done(self, pending: Pending) -> bool:
        """Whether a launched pass has run (its output is on the host), without waiting."""
        return pending.event is None or pending.event.query()

    def collect(self, pending: Pending) -> np.ndarray:
        """The pass's logprobs, one per real read in segment order (waits for the GPU on CUDA)."""
        if pending.event is not None:
            pending.event.synchronize()
        return pending.output[:pending.reads].numpy().copy()


def _media_of(arrays: Sequence[SegmentArrays], starts: Sequence[int], positions: np.ndarray) -> dict:
    """A pass's `Launch.media`, `Launch.firsts` and `Launch.rope_positions` from its segments' media (placed at
    `starts`; `positions` [T]: the staged pass's, which every row without three positions of its own repeats)."""
    T = len(positions)
    rows, reads, firsts, rope = [], [], None, None
    for a, start in zip(arrays, starts):
        for first, read in a.media:
            rows.extend(start + first + offset for offset in read.embedded)
            reads.append(read)
        if a.firsts is not None:
            if firsts is None:
                firsts = np.arange(T, dtype=np.int32)
            firsts[start:start + len(a.firsts)] = a.firsts + start
        if a.rope_positions is not None:
            if rope is None:
                rope = np.repeat(positions[None, :], 3, axis=0)  # [3, T]
            rope[:, start:start + a.rope_positions.shape[1]] = a.rope_positions
    return {"media": MediaRows(torch.tensor(rows, dtype=torch.int64), tuple(reads)),
            "firsts": None if firsts is None else torch.from_numpy(firsts),
            "rope_positions": None if rope is None else torch.from_numpy(rope)}


@attrs.frozen
class _Spans:
    """What the extraction decode reads of a pass's layout: its spans."""

    spans: tuple[tuple[int, int], ...]
