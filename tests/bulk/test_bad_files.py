"""`spinfc score` on bad files (issue 24): one located line and exit 2, before any model loads, or an error row for the
row at fault while the good rows are kept; never a traceback."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spinfc.bulk import readers
from spinfc.bulk.errors import BulkError
from spinfc.bulk.readers import open_input
from spinfc.bulk.writers import check_output
from spinfc.cli import main

from .paths import QUERIES


def _parquet(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [str(i) for i in range(50)], "text": ["hello there"] * 50}), path)
    return path


@pytest.mark.parametrize("damage", ["truncated", "zeroed"])
def test_a_damaged_parquet_file_is_one_located_line_and_exit_2(tmp_path, capsys, damage):
    path = _parquet(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else bytes(len(data)))
    status = main(["score", str(path), "-o", str(tmp_path / "out"), "--queries", QUERIES])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and f"input {path}: not a readable Parquet file" in err, err


def test_an_output_whose_folder_is_a_file_is_refused_before_the_model_loads(tmp_path, capsys):
    (tmp_path / "plain").write_text("x")
    out = tmp_path / "plain" / "out.jsonl"
    with pytest.raises(BulkError, match="is a file, not a folder"):
        check_output(str(out), resume=False)
    status = main(["score", str(_parquet(tmp_path)), "-o", str(out), "--queries", QUERIES])
    assert status == 2 and "is a file, not a folder" in capsys.readouterr().err


def test_a_csv_with_one_huge_field_keeps_its_good_rows(tmp_path, monkeypatch):
    """A 20 MB field: read (the reader's block holds it), then an error row of its own before it costs anything."""
    path = tmp_path / "in.csv"
    huge = "word " * 4_000_000
    path.write_text(f"id,text\na,first good row\nb,{huge}\nc,last good row\n")
    rows = [row for batch in open_input(str(path)).batches(10) for row in batch]
    assert [row.id for row in rows] == ["a", "b", "c"]
    assert [row.problem.code if row.problem else None for row in rows] == [None, "content_too_long", None]
    assert rows[1].text is None  # the 20 MB is not kept for the error log


def test_a_csv_field_past_the_reader_block_stops_with_a_located_line(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "CSV_BLOCK_BYTES", 1 << 16)
    path = tmp_path / "in.csv"
    path.write_text("id,text\na,good\nb," + "x" * (1 << 18) + "\n")
    with pytest.raises(BulkError, match=f"input {path}: cannot be read past here"):
        [row for batch in open_input(str(path)).batches(10) for row in batch]


@pytest.mark.slow
def test_score_on_a_csv_with_a_long_field_and_a_malformed_line_writes_every_row(tmp_path, capsys):
    """Issue 47 item 3's reproduction through the CLI on SmolLM2: a traceback (`field larger than field limit`) and no
    rows before; now the long row is refused with its row number, the malformed line named, the others scored."""
    path, out = tmp_path / "h.csv", tmp_path / "o.jsonl"
    path.write_text('id,text\na,x\nb,"' + "x" * 200_000 + '"\nd,too,many,fields\ne,y\n')
    status = main(["score", str(path), "-o", str(out), "--queries", QUERIES, "--model", "smollm2-135m", "--quiet"])
    assert status == 0 and "Traceback" not in capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["row"], row["id"], row["error_code"]) for row in rows] == [
        (0, "a", None), (1, "b", "max_content_tokens_exceeded"), (2, None, "malformed_line"), (3, "e", None)]
    assert rows[2]["error"] == "line 4: 4 fields where the header has 2"
    assert all(0 <= rows[k]["q__refund__yes__p"] <= 1 for k in (0, 3))
