"""The passes, in order. Each is a pure `(Program, PassContext) -> Program` that fills in one more stage of the IR;
the context carries what a pass needs from outside (the tokenizer, the shapes), so no pass looks anything up."""

from __future__ import annotations

from typing import Callable

from spinfc.ir.nodes import Program
from spinfc.ir.verifier import verify as verify_program
from spinfc.passes.add_floor import add_floor
from spinfc.passes.context import PassContext
from spinfc.passes.dedupe_prefixes import dedupe_prefixes
from spinfc.passes.expand_placeholders import expand_placeholders
from spinfc.passes.layout import layout
from spinfc.passes.plan_packing import plan_packing
from spinfc.passes.read_media import read_media
from spinfc.passes.segment import segment
from spinfc.passes.tokenize import tokenize

Transform = Callable[[Program, PassContext], Program]

PIPELINE: tuple[tuple[str, Transform], ...] = (
    ("expand-placeholders", lambda program, ctx: expand_placeholders(program, ctx.memo)),
    ("add-floor", lambda program, ctx: add_floor(program)),
    ("read-media", read_media),
    ("tokenize", tokenize),
    ("dedupe-prefixes", lambda program, ctx: dedupe_prefixes(program, ctx.memo)),
    ("segment", segment),
    ("plan-packing", plan_packing),
    ("layout", layout),
)

__all__ = ["PIPELINE", "PASS_NAMES", "PassContext", "run", "add_floor", "dedupe_prefixes",
           "expand_placeholders", "layout", "plan_packing", "read_media", "segment", "tokenize"]

PASS_NAMES = tuple(name for name, _ in PIPELINE)

# where the engine stops: the scheduler packs and lays out the segments of every request in flight
SCHEDULED_FROM = "segment"


def run(program: Program, ctx: PassContext, until: str | None = None, verify: bool = False,
        check: Callable[[Program], None] | None = None) -> Program:
    """Run the pipeline in order, through the pass named `until` (every pass when None). With `verify`, the IR
    verifier checks the program after every pass and raises `IRVerifyError` naming the pass that broke it. `check`
    sees the program once, after the last pass run, and may raise to refuse it (the server's limits)."""
    if until is not None and until not in PASS_NAMES:
        raise ValueError(f"unknown pass {until!r}: the passes are {', '.join(PASS_NAMES)}")
    for name, transform in PIPELINE:
        program = transform(program, ctx)
        if verify:
            verify_program(program, after=name)
        if name == until:
            break
    if check is not None:
        check(program)
    return program
