"""The compiler driver, the one way through for the CLI, the engine and the benchmarks: a pack or a request in,
the IR program out, stopped after any pass.

    source (pack.toml | /v1/score request.json)
      -> frontend    load_source: templates parsed, queries and contents as IR
      -> passes      compile(program, ctx): expand-placeholders, add-floor, tokenize, dedupe-prefixes, segment
                     (where the engine stops: its scheduler packs the segments of every request in flight),
                     plan-packing, layout (the scheduler's packer and layout on this program alone)
      -> backend     lower_program: one fixed-shape `Launch` per pass (on CUDA at its launch size)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from collections.abc import Callable

import attrs

from spinfc import frontend, passes
from spinfc.errors import CompileError
from spinfc.frontend.json_body import read_json
from spinfc.ir.nodes import Program, SourceLoc
from spinfc.passes import PASS_NAMES, PassContext

if TYPE_CHECKING:  # torch is needed to lower, not to compile: `spinfc compile` runs without the serve extra
    from spinfc.backend.launch import Launch

# what `spinfc compile --emit STAGE` prints: the program as the frontend built it (`parse`), after a pass (its name),
# or its launches; the short names of the first version are kept as aliases
ALIASES = {"ir": "add-floor", "tokens": "tokenize", "dedup": "dedupe-prefixes", "plan": "plan-packing"}
STAGES: tuple[str, ...] = ("parse", *PASS_NAMES, "launches")


def load_source(path_or_json: str | Path | Mapping[str, Any], model: str, contents: Sequence[str] = ()) -> Program:
    """The frontend's program for a pack file (`.toml`, asked about `contents`, or only about the floor when there
    are none), a /v1/score request file (`.json`), or a request body given as a mapping.
    Raises `CompileError` for a missing file, JSON that does not parse, or anything the frontend rejects."""
    if isinstance(path_or_json, Mapping):
        return frontend.program_from_request(path_or_json, model)
    path = Path(path_or_json)
    if not path.is_file():
        raise CompileError(f"no such file: {path}", code="not_found",
                           hint="give the path of a pack (.toml) or of a /v1/score request body (.json)")
    if path.suffix == ".toml":
        return frontend.program_from_pack(frontend.load_pack(path), list(contents), model)
    if path.suffix == ".json":
        if contents:
            raise CompileError("contents are given with a pack; a request carries its own in `messages`",
                               SourceLoc(str(path)), code="contents_with_request",
                               hint="drop --content, or put the texts in the request's messages")
        return frontend.program_from_request(_read_json(path), model, source=str(path))
    raise CompileError(f"{path} is neither a pack (.toml) nor a request (.json)", SourceLoc(str(path)),
                       code="unknown_source", hint="name a .toml pack file or a .json /v1/score request body")


def _read_json(path: Path) -> Any:
    """The file's JSON, read as the server reads a body (depth bounded, invalid_json with line and column)."""
    return read_json(path.read_bytes(), source=str(path))


def compile(program: Program, ctx: PassContext, until: str | None = None, verify: bool = False,
            check: Callable[[Program], None] | None = None) -> Program:
    """Run the passes on `program` for the shapes of `ctx`, through the pass `until` (all of them when None); see
    `spinfc.passes.run`. The program records the budget and block it was compiled for."""
    program = attrs.evolve(program, budget=ctx.shapes.budget, block=ctx.shapes.block)
    return passes.run(program, ctx, until=until, verify=verify, check=check)


def stage_pass(stage: str) -> str | None:
    """The pass after which `--emit stage` prints (None for `parse`); raises ValueError for an unknown stage."""
    stage = ALIASES.get(stage, stage)
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}: the stages are {', '.join(STAGES)} "
                         f"(aliases: {', '.join(ALIASES)})")
    return {"parse": None, "launches": "layout"}.get(stage, stage)


def compile_stage(program: Program, stage: str, ctx: PassContext, verify: bool = False) -> Program:
    """The program as `--emit stage` shows it."""
    until = stage_pass(stage)
    return program if until is None else compile(program, ctx, until=until, verify=verify)


def launch_shapes(program: Program, shapes=None) -> tuple[tuple[int, int, int], ...]:
    """(T, R, N) of each pass's launch. Where the shapes are fixed (CUDA): the launch size each pass runs at, as the
    runner picks it (`Shapes.launch_for`); else every pass at the most answer rows and reads of any pass rounded up
    to the block, so that the passes lower to one shape."""
    def counts(lay):
        return len({r.row for r in lay.reads} | {c.row for c in lay.content_rows}), len(lay.reads)

    if shapes is not None and shapes.fixed:
        return tuple(shapes.launch_for(lay.budget, *counts(lay)) for lay in program.layouts)
    block = program.block
    rows = max((counts(lay)[0] for lay in program.layouts), default=0)
    reads = max((counts(lay)[1] for lay in program.layouts), default=0)
    R, N = max(block, -(-rows // block) * block), max(block, -(-reads // block) * block)
    return tuple((lay.budget, R, N) for lay in program.layouts)


def lower_program(program: Program, shapes=None) -> tuple:
    """One `Launch` per pass of a compiled program, each of its shape in `launch_shapes(program, shapes)`."""
    from spinfc.backend.launch import lower  # torch, the serve extra: `spinfc compile` up to layout runs without it

    return tuple(lower(layout, rows_padded_to=R, reads_padded_to=N)
                 for layout, (_, R, N) in zip(program.layouts, launch_shapes(program, shapes)))
