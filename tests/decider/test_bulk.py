"""`spinfc score` with a decision model: a question over every code gets one column per code of the model (its
codes read from config.json), a listed one per listed code, and each row's code p's add up to 1."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from spinfc.cli import main

from .random_decider import labels

pytestmark = pytest.mark.slow  # a packaged tokenizer and real passes


def test_a_bulk_job_writes_a_column_per_code(tmp_path):
    from .random_decider import random_decider

    random_decider("llama", tmp_path / "model", count=8)
    rows = tmp_path / "in.jsonl"
    rows.write_text("".join(json.dumps({"id": f"r{i}", "text": f"I was charged {i + 2} times."}) + "\n"
                            for i in range(3)))
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"id": "queue", "template": "\n\nQueue:<?>", "codes": "all"},
                                   {"id": "pair", "template": "\n\nPair:<?>", "codes": ["L3", "code_004"]}]))
    out = tmp_path / "out"
    assert main(["score", str(rows), "-o", str(out), "--queries", str(queries), "--model",
                 str(tmp_path / "model")]) == 0
    table = pq.read_table(out).to_pylist()
    assert len(table) == 3
    for row in table:
        every = [row[f"q__queue__{code}__p"] for code in labels(8).values()]
        assert abs(sum(every) - 1) < 1e-5 and abs(row["q__queue__residual"]) < 1e-5
        assert abs(row["q__pair__L3__p"] + row["q__pair__code_004__p"] - 1) < 1e-6
