"""The compiler driver: a pack or a request in, the IR program out, stopped after any stage.

    source (pack.toml | /v1/score request.json)
      -> frontend    load_source: templates parsed, queries and contents as IR
      -> passes      expand-placeholders, add-floor, tokenize, dedupe-prefixes, plan-packing, layout
      -> backend     lower_program: one fixed-shape `Launch` per pass
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from spinfc import frontend, passes
from spinfc.errors import CompileError
from spinfc.ir.nodes import Program, SourceLoc

if TYPE_CHECKING:  # torch is needed to lower, not to compile: `spinfc compile` runs without the serve extra
    from spinfc.backend.launch import Launch

# what `spinfc compile --emit STAGE` prints: the program after this pass (None: as the frontend built it)
STAGES: dict[str, str | None] = {
    "parse": None,
    "ir": "add-floor",
    "tokens": "tokenize",
    "dedup": "dedupe-prefixes",
    "plan": "plan-packing",
    "launches": "layout",
}


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
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CompileError(f"the request is not valid JSON: {error.msg}",
                           SourceLoc(str(path), error.lineno, error.colno), code="bad_json",
                           hint="fix the JSON syntax at this place") from None


def compile_program(program: Program, until: str | None = None, verify: bool = False) -> Program:
    """Run the passes on `program`, through the pass `until` (all of them when None); see `spinfc.passes.run`."""
    return passes.run(program, until=until, verify=verify)


def compile_stage(program: Program, stage: str, verify: bool = False) -> Program:
    """The program as `--emit stage` shows it (a key of `STAGES`)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}: the stages are {', '.join(STAGES)}")
    until = STAGES[stage]
    return program if until is None else compile_program(program, until=until, verify=verify)


def fixed_shapes(program: Program) -> tuple[int, int, int]:
    """(T, R, N) for this program's launches: the token budget, and the most answer rows and reads of any pass,
    each rounded up to the block, so that every pass lowers to one shape."""
    block = program.block
    rows = max((len({r.row for r in lay.reads}) for lay in program.layouts), default=0)
    reads = max((len(lay.reads) for lay in program.layouts), default=0)
    return program.budget, max(block, -(-rows // block) * block), max(block, -(-reads // block) * block)


def lower_program(program: Program) -> tuple[Launch, ...]:
    """One `Launch` per pass of a compiled program, all of the shape `fixed_shapes(program)` (needs torch)."""
    from spinfc.backend.launch import lower

    _, rows, reads = fixed_shapes(program)
    return tuple(lower(layout, rows_padded_to=rows, reads_padded_to=reads) for layout in program.layouts)
