"""Prompt packs: a job's questions, how the content is presented, how answers become scores and a decision.

A pack is one TOML file (format: docs/packs.md). `load_pack(path)` reads and checks it (pack_reader.py) and
returns a frozen `Pack`; `program_from_pack(pack, contents, model)` is the IR program that asks every question
of the pack about every content. `spinfc.runtime.deliver.pack_scores.score_pack` turns the answers into category scores
and the decision.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from attrs import frozen

from spinfc.frontend.pack_calibration import Calibration
from spinfc.ir.nodes import Content, Program, Query
from spinfc.registry import EMBEDDED

Combine = Literal["max", "mean", "weighted_sum", "noisy_or"]
COMBINERS: tuple[Combine, ...] = ("max", "mean", "weighted_sum", "noisy_or")
Op = Literal[">=", ">", "<=", "<"]
Baseline = Literal["none", "floor"]
BASELINES: tuple[Baseline, ...] = ("none", "floor")


@frozen
class Member:
    """One probability counted in a category: option `option` of question `question`, times `weight`.

    `values` fixes some of the question's placeholders (name, value); the others range over all their values,
    so a member with no `values` counts every combination of a grid question."""

    question: str
    option: str
    weight: float = 1.0
    values: tuple[tuple[str, str], ...] = ()


@frozen
class Category:
    """A score combined from members' probabilities; with baseline="floor" each member counts its lift over
    the floor, max(0, (p - floor_p) / (1 - floor_p)): what the content added, not the model's prior."""

    id: str
    combine: Combine
    members: tuple[Member, ...]
    description: str = ""
    baseline: Baseline = "none"


@frozen
class Condition:
    """`category op threshold`, e.g. violence >= 0.8."""

    category: str
    op: Op
    threshold: float

    def holds(self, score: float) -> bool:
        t = self.threshold
        return {">=": score >= t, ">": score > t, "<=": score <= t, "<": score < t}[self.op]

    def __str__(self) -> str:
        return f"{self.category} {self.op} {self.threshold:g}"


@frozen
class Rule:
    """Fires when any (match="any") or all (match="all") of its conditions hold; the first rule to fire decides."""

    label: str
    match: Literal["any", "all"]
    conditions: tuple[Condition, ...]


@frozen
class Decision:
    rules: tuple[Rule, ...]
    default: str

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*(r.label for r in self.rules), self.default]))


@frozen
class Pack:
    id: str  # namespace/name
    version: str
    description: str
    models: tuple[str, ...]  # the models it was written for (registry names or aliases)
    presentation_before: str  # the text before {content}
    presentation_after: str  # the text after {content}
    queries: tuple[Query, ...]
    categories: tuple[Category, ...] = ()
    decision: Decision | None = None
    path: Path | None = None
    calibration: Calibration | None = None  # the thresholds `spinfc calibrate` chose, and on what

    def query(self, query_id: str) -> Query:
        """The question with id `query_id`; KeyError when the pack has none."""
        for query in self.queries:
            if query.id == query_id:
                return query
        raise KeyError(f"pack {self.id!r} has no question {query_id!r}")

    def written_for(self, model: str) -> bool:
        """Whether `model` (a name or an alias of the registry) is one this pack was written for."""
        return canonical_model(model) in {canonical_model(m) for m in self.models}


def combinations(query: Query, fixed: tuple[tuple[str, str], ...] = ()) -> list[tuple[tuple[str, str], ...]]:
    """Every combination of `query`'s placeholder values, in its placeholder order, that agrees with `fixed`;
    `[()]` for a query without placeholders. These are the `values` of its questions after expansion."""
    pinned = dict(fixed)
    axes = [
        [(name, v) for v in values if name not in pinned or v == pinned[name]] for name, values in query.placeholders
    ]
    return [tuple(combo) for combo in itertools.product(*axes)]


def canonical_model(name: str) -> str:
    """The registry's served name for an embedded model's alias; any other name as it is (no files are read)."""
    for served, (aliases, _locate) in EMBEDDED.items():
        if name == served or name in aliases:
            return served
    return name


def program_from_pack(pack: Pack, contents: Sequence[str], model: str) -> Program:
    """The program asking every question of `pack` about each content (ids `input-0`, `input-1`, ...),
    each content presented inside the pack's presentation text."""
    if isinstance(contents, str):
        raise TypeError("contents is a sequence of texts; wrap a single text in a list: [text]")
    return Program(
        model=model,
        contents=tuple(Content(f"input-{i}", text) for i, text in enumerate(contents)),
        queries=pack.queries,
        present_before=pack.presentation_before,
        present_after=pack.presentation_after,
    )
