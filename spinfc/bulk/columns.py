"""The output's columns: one flat, typed column per number, named by a stable scheme (docs/bulk.md).

    id, row, error_code, error                                   every row (error_code/error null when scored)
    q__<query>[__<values>]__<option>__{p,floor_p,logprob}        float64, each option of the --queries queries
    q__<query>[__<values>]__residual                             float64, each question (placeholder combination)
    <pack>__<query>[__<values>]__<option>__{p,floor_p,logprob}   the same for each pack's questions
    <pack>__<query>[__<values>]__residual
    <pack>__category__<category>                                 float64, each category of the pack
    <pack>__decision                                             string, when the pack has a decision

Names are slugs: runs of characters other than letters, digits and `_` become one `_` (" yes" -> yes, "an order"
-> an_order); `<pack>` is the pack id's name (spinfc/support-triage -> support_triage); `<values>` are the
placeholder values' slugs in placeholder order. A name already taken gets `_2`, `_3`, ... The same questions
always give the same columns, in the same order. The file's metadata (`spinfc.columns`) maps every column back to
the exact query id, values, option text and field.
"""

from __future__ import annotations

import json
import re

import attrs
import pyarrow as pa

from spinfc.bulk.questions import QuestionSet
from spinfc.frontend.pack import combinations
from spinfc.ir.nodes import Option, Query
from spinfc.wire.results import QueryResult

BASE = (("id", pa.string()), ("row", pa.int64()), ("error_code", pa.string()), ("error", pa.string()))
OPTION_FIELDS = ("p", "floor_p", "logprob")


def slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_") or "_"


@attrs.frozen
class Column:
    name: str
    type: pa.DataType
    source: dict  # what it holds: {"pack", "query", "values", "option", "field"} or {"pack", "category"} ...


class Layout:
    """The columns of a question set, and how one content's results become one row."""

    def __init__(self, questions: QuestionSet):
        self.columns: list[Column] = []
        self._taken = {name for name, _ in BASE}
        self._by_key: dict[tuple, str] = {}
        self.questions = 0  # questions asked of each content (placeholder combinations counted), packs included
        self._codes = questions.codes  # what a `codes = "all"` question's columns are
        for query in questions.own:
            self._add_query("q", None, query)
        for pack in questions.packs:
            prefix = slug(pack.id.split("/")[-1])
            for query in pack.queries:
                self._add_query(prefix, pack.id, query)
            for category in pack.categories:
                self._add(f"{prefix}__category__{slug(category.id)}", pa.float64(),
                          {"pack": pack.id, "category": category.id}, ("category", pack.id, category.id))
            if pack.decision is not None:
                self._add(f"{prefix}__decision", pa.string(), {"pack": pack.id, "field": "decision"},
                          ("decision", pack.id))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in BASE] + [c.name for c in self.columns]

    def schema(self, metadata: dict[str, str]) -> pa.Schema:
        """The arrow schema with `metadata` and the column map (`spinfc.columns`) in its metadata."""
        fields = [pa.field(name, kind) for name, kind in BASE] + [pa.field(c.name, c.type) for c in self.columns]
        column_map = json.dumps([{"name": c.name, **c.source} for c in self.columns])
        return pa.schema(fields, metadata={**metadata, "spinfc.columns": column_map})

    def scored_row(self, row: int, row_id: str | None, own: list[QueryResult], packs: list) -> dict:
        """The row of one content: `own` its results for the --queries queries, `packs` one PackResult per pack."""
        out: dict = {"id": row_id, "row": row, "error_code": None, "error": None}
        self._fill(out, None, own)
        for pack in packs:
            self._fill(out, pack.id, pack.results)
            for category, score in pack.categories.items():
                out[self._by_key[("category", pack.id, category)]] = score
            if ("decision", pack.id) in self._by_key:
                out[self._by_key[("decision", pack.id)]] = pack.decision
        return out

    @staticmethod
    def error_row(row: int | None, row_id: str | None, code: str, message: str) -> dict:
        """The row of a content that was not scored: its scores are null."""
        return {"id": row_id, "row": row, "error_code": code, "error": message}

    def _fill(self, out: dict, pack: str | None, results: list[QueryResult]) -> None:
        for result in results:
            for combination in result.combinations:
                values = tuple(sorted(combination.values.items()))
                out[self._by_key[("residual", pack, result.id, values)]] = combination.residual
                for option in combination.options:
                    for field in OPTION_FIELDS:
                        out[self._by_key[(field, pack, result.id, values, option.text)]] = getattr(option, field)

    def _add_query(self, prefix: str, pack: str | None, query: Query) -> None:
        every_code = getattr(query.slot, "codes", False) and not query.slot.options
        options = [Option(code) for code in self._codes] if every_code else query.slot.options
        option_names = _unique([slug(option.text) for option in options])
        for values in combinations(query):
            self.questions += 1
            parts = [prefix, slug(query.id)]
            if values:
                parts.append("_".join(slug(value) for _, value in values))
            stem = "__".join(parts)
            where = {"pack": pack, "query": query.id, "values": dict(values)}
            key_values = tuple(sorted(values))
            for option, option_name in zip(options, option_names):
                for field in OPTION_FIELDS:
                    self._add(f"{stem}__{option_name}__{field}", pa.float64(),
                              {**where, "option": option.text, "field": field},
                              (field, pack, query.id, key_values, option.text))
            self._add(f"{stem}__residual", pa.float64(), {**where, "field": "residual"},
                      ("residual", pack, query.id, key_values))

    def _add(self, name: str, kind: pa.DataType, source: dict, key: tuple) -> None:
        unique, n = name, 1
        while unique in self._taken:
            n += 1
            unique = f"{name}_{n}"
        self._taken.add(unique)
        self._by_key[key] = unique
        self.columns.append(Column(unique, kind, source))


def _unique(names: list[str]) -> list[str]:
    """Option slugs made unique within a query: a repeated slug gets its option's index (yes, yes_1)."""
    seen: set[str] = set()
    out = []
    for i, name in enumerate(names):
        out.append(name if name not in seen else f"{name}_{i}")
        seen.add(out[-1])
    return out
