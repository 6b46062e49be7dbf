"""The passes, in order. Each is a pure `Program -> Program` that fills in one more stage of the IR."""

from __future__ import annotations

from typing import Callable

from spinfc.ir.nodes import Program
from spinfc.passes.add_floor import add_floor
from spinfc.passes.dedupe_prefixes import dedupe_prefixes
from spinfc.passes.expand_placeholders import expand_placeholders
from spinfc.passes.layout import layout
from spinfc.passes.plan_packing import plan_packing
from spinfc.passes.tokenize import tokenize

PIPELINE: tuple[tuple[str, Callable[[Program], Program]], ...] = (
    ("expand-placeholders", expand_placeholders),
    ("add-floor", add_floor),
    ("tokenize", tokenize),
    ("dedupe-prefixes", dedupe_prefixes),
    ("plan-packing", plan_packing),
    ("layout", layout),
)

PASS_NAMES = tuple(name for name, _ in PIPELINE)


def run(program: Program, until: str | None = None, verify: bool = False) -> Program:
    """Run the pipeline in order, through the pass named `until` (every pass when None). With `verify`, the IR
    verifier checks the program after every pass and raises `IRVerifyError` naming the pass that broke it."""
    if until is not None and until not in PASS_NAMES:
        raise ValueError(f"unknown pass {until!r}: the passes are {', '.join(PASS_NAMES)}")
    if verify:
        from spinfc.ir.verifier import verify as check
    for name, transform in PIPELINE:
        program = transform(program)
        if verify:
            check(program, after=name)
        if name == until:
            break
    return program
