"""The runner stages what `spinfc compile --emit launches` shows: for CUDA's fixed shapes (launch sizes included),
each pass of a compiled request, staged by the runner from its segments, is the compiler's lowered launch, tensor
for tensor; a pass launches at the smallest size holding it, and a segment's rows are the same at every size."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from spinfc.compiler import compile, lower_program
from spinfc.frontend import program_from_request
from spinfc.passes import PassContext
from spinfc.registry import load_tokenizer
from spinfc.runtime.launch.runner import Runner, SegmentArrays
from spinfc.shapes import Shapes

BODY = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "multi-input.json").read_text())
FIELDS = ("tokens", "positions", "ends", "rows", "read_row", "read_token")


def _compiled(shapes: Shapes):
    program = program_from_request(BODY, model="gemma3-270m")
    return compile(program, PassContext(tokenizer=load_tokenizer("gemma3-270m"), shapes=shapes))


def _staged(shapes: Shapes, program, placements):
    runner = Runner(model=None, shapes=shapes, device="cpu")
    arrays = [SegmentArrays.of(program.segments[p.content]) for p in placements]
    launch, pending = runner.stage(arrays)
    return launch, pending


def test_the_runner_stages_the_compilers_launches_at_their_launch_sizes():
    shapes = Shapes(budget=1024, block=64, answer_rows=128, reads=1024, sizes=(256, 512, 768, 1024))
    program = _compiled(shapes)
    lowered = lower_program(program, shapes)
    assert len(lowered) >= 1
    for pss, want in zip(program.plan.passes, lowered):
        launch, pending = _staged(shapes, program, pss.placements)
        assert launch.budget == want.budget and launch.budget < shapes.budget  # a part-full pass: a smaller size
        assert launch.spans == want.spans
        for field in FIELDS:
            assert torch.equal(getattr(launch, field), getattr(want, field)), field
        assert int(launch.rows.shape[0]) == launch.budget // 8 and int(launch.read_row.shape[0]) == launch.budget
        assert pending.rows == launch.budget


def test_a_segment_has_the_same_rows_at_every_launch_size():
    small = Shapes(budget=1024, block=64, answer_rows=128, reads=1024, sizes=(256, 512, 768, 1024))
    full = Shapes(budget=1024, block=64, answer_rows=128, reads=1024, sizes=(1024,))
    program = _compiled(small)
    placements = program.plan.passes[0].placements
    a, _ = _staged(small, program, placements)
    b, _ = _staged(full, program, placements)
    assert a.budget < b.budget == 1024
    used = a.spans[-1][1]
    for field in ("tokens", "positions", "ends"):
        assert torch.equal(getattr(a, field)[:used], getattr(b, field)[:used]), field
    reads = sum(len(program.segments[p.content].reads) for p in placements)
    assert torch.equal(a.read_token[:reads], b.read_token[:reads])
    assert torch.equal(a.rows[a.read_row[:reads]], b.rows[b.read_row[:reads]])  # each read on the same row
    assert torch.equal(b.ends[a.budget:], torch.arange(a.budget + 1, 1025, dtype=torch.int32))  # padding: itself
