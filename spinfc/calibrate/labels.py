"""The labelled file's label columns, and the scores each is calibrated against.

A label column is named by a category id of the pack (its score), or by a question id (the p of its first
option, e.g. " yes"; a question with placeholders is calibrated through its category). Values are 1/0, true/false
or yes/no; an empty value leaves the row out of that column's curve.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import numpy as np
import pyarrow as pa

from spinfc.bulk.errors import BulkError
from spinfc.bulk.readers import input_format
from spinfc.calibrate.thresholds import contextual

TRUE = {"1", "true", "yes", "y", "t"}
FALSE = {"0", "false", "no", "n", "f"}


@attrs.frozen
class Target:
    kind: str  # "category" or "question"
    id: str  # the category or question id (as the label column names it)
    pack: str | None  # the pack id; None for a --queries question
    columns: tuple[str, ...]  # category: its score column; question: the p columns of its options, in order
    floors: tuple[str, ...] = ()  # question: the floor_p columns of its options


def read_table(path: str) -> pa.Table:
    kind = input_format(path)
    if kind == "jsonl":
        rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        return pa.Table.from_pylist(rows)
    if kind == "csv":
        import pyarrow.csv as pacsv

        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    import pyarrow.parquet as pq

    return pq.read_table(path)


def label_values(table: pa.Table, column: str, path: str) -> list[bool | None]:
    out = []
    for k, value in enumerate(table.column(column).to_pylist()):
        if value is None or value == "":
            out.append(None)
            continue
        text = str(value).strip().lower()
        if text in TRUE or text in FALSE:
            out.append(text in TRUE)
        else:
            raise BulkError(f"{path}: row {k}, label column {column!r} holds {value!r}: labels are 1/0, true/false "
                            "or yes/no (empty: not labelled)")
    return out


def targets(column_map: list[dict], label_columns: list[str], path: str) -> list[Target]:
    """The score columns each label column is calibrated against (`column_map`: the scores' spinfc.columns)."""
    found = []
    for label in label_columns:
        categories = [c for c in column_map if c.get("category") == label]
        options = [c for c in column_map if c.get("query") == label and c.get("field") in ("p", "floor_p")]
        if categories:
            found.append(Target("category", label, categories[0]["pack"], (categories[0]["name"],)))
        elif options:
            if any(c["values"] for c in options):
                raise BulkError(f"{path}: label column {label!r} names a question with placeholders; label one of "
                                "the categories that counts it instead")
            p = tuple(c["name"] for c in options if c["field"] == "p")
            floor = tuple(c["name"] for c in options if c["field"] == "floor_p")
            found.append(Target("question", label, options[0]["pack"], p, floor))
        else:
            raise BulkError(f"{path}: label column {label!r} names no category or question of the questions "
                            "scored; name a label column after a category id or a question id")
    return found


def target_scores(scores: pa.Table, target: Target, correction: str) -> np.ndarray:
    """The score of each row for `target`: a category's score, or a question's first-option p (corrected by its
    content-free prior when `correction` is "floor")."""
    if target.kind == "category":
        return np.asarray(scores.column(target.columns[0]).to_pylist(), dtype=float)
    p = np.stack([np.asarray(scores.column(c).to_pylist(), dtype=float) for c in target.columns], axis=-1)
    if correction == "floor":
        floor = np.stack([np.asarray(scores.column(c).to_pylist(), dtype=float) for c in target.floors], axis=-1)
        p = contextual(p, floor)
    return p[:, 0]


def default_labels(table: pa.Table, column_map: list[dict], skip: set[str]) -> list[str]:
    """The columns of the labelled file that name a category or a question of the scored questions."""
    known = {c.get("category") for c in column_map} | {c.get("query") for c in column_map}
    return [name for name in table.column_names if name not in skip and name in known]
