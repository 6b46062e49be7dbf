"""Input files: the columns are checked before any work, and bad rows are marked in their place."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spinfc.bulk.errors import BulkError
from spinfc.bulk.readers import open_input


def _rows(source, size=3):
    return [row for batch in source.batches(size) for row in batch]


def test_parquet_in_batches_with_empty_and_non_text_rows(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"doc": [1, 2, 3, 4], "body": ["hello", "", "  ", "world"]}), path)
    source = open_input(str(path), text_column="body", id_column="doc")
    assert source.total == 4
    batches = list(source.batches(3))
    assert [len(b) for b in batches] == [3, 1]
    rows = [row for batch in batches for row in batch]
    assert [r.id for r in rows] == ["1", "2", "3", "4"]
    assert [r.index for r in rows] == [0, 1, 2, 3]  # positions in the file, across batches
    assert [r.problem and r.problem.code for r in rows] == [None, "empty_content", "empty_content", None]


def test_a_missing_column_names_the_column_and_the_columns_found(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a"], "body": ["x"]}), path)
    with pytest.raises(BulkError, match=r"no column 'text' \(--text-column\); the columns are 'id', 'body'"):
        open_input(str(path))


def test_jsonl_malformed_lines_missing_fields_and_non_text(tmp_path):
    path = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": "a", "text": "fine"}), "{not json", json.dumps([1, 2]), "",
             json.dumps({"id": "d"}), json.dumps({"id": "e", "text": 17}), json.dumps({"id": None, "text": "x"})]
    path.write_text("\n".join(lines) + "\n")
    source = open_input(str(path))
    assert source.total == 6  # blank lines are not rows
    rows = _rows(source)
    assert [r.index for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [r.problem and r.problem.code for r in rows] == [
        None, "malformed_line", "malformed_line", "missing_field", "not_text", "missing_id"]
    assert f"{path}:2: not valid JSON" in rows[1].problem.message
    assert rows[3].id == "d"


def test_jsonl_schema_is_read_from_the_first_object(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"key": "a", "text": "x"}) + "\n")
    with pytest.raises(BulkError, match=r"no column 'id' \(--id-column\); the columns are 'key', 'text'"):
        open_input(str(path))


def test_csv_with_a_malformed_line(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text('id,text,lang\n1,"hello, there",en\n2,broken\n3,"multi\nline",en\n4,,en\n')
    rows = _rows(open_input(str(path)), size=10)
    assert sorted(r.problem.code for r in rows if r.problem) == ["empty_content", "malformed_line"]
    good = {r.id: r.text for r in rows if r.problem is None}
    assert good == {"1": "hello, there", "3": "multi\nline"}
    assert len(rows) == 4


@pytest.mark.parametrize("size", [1, 2, 10])
def test_a_malformed_csv_line_keeps_its_place_among_the_rows(tmp_path, size):
    """Issue 38's reproduction: the malformed line is row 2, between b and e, as in JSONL (it was row 0, a=1)."""
    path = tmp_path / "in.csv"
    path.write_text("id,text\na,one refund please\nb,two\nd,too,many,fields\ne,last row\n")
    rows = _rows(open_input(str(path)), size=size)
    assert [(r.index, r.id, r.problem and r.problem.code) for r in rows] == [
        (0, "a", None), (1, "b", None), (2, None, "malformed_line"), (3, "e", None)]
    assert rows[2].problem.message == "line 4: 4 fields where the header has 2"


def test_a_field_over_pythons_csv_limit_beside_a_malformed_line(tmp_path):
    """Issue 47 item 3: Python's `csv` (which places the malformed line) stopped at a field over its 131,072
    characters with `_csv.Error`, and no row came; the field is read as pyarrow reads it, the line named in place."""
    path = tmp_path / "in.csv"
    path.write_text('id,text\na,x\nb,"' + "x" * 200_000 + '"\nd,too,many,fields\ne,y\n')
    rows = _rows(open_input(str(path)), size=2)
    assert [(r.index, r.id, r.problem and r.problem.code) for r in rows] == [
        (0, "a", None), (1, "b", None), (2, None, "malformed_line"), (3, "e", None)]
    assert len(rows[1].text) == 200_000
    assert rows[2].problem.message == "line 4: 4 fields where the header has 2"


def test_malformed_csv_lines_first_last_and_after_a_multiline_value(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text('id,text\nx,y,z\na,"two\nlines"\n\nb,fine\nc\nd,ok\nq,r,s\n')
    rows = _rows(open_input(str(path)), size=2)
    assert [(r.index, r.id) for r in rows] == [(0, None), (1, "a"), (2, "b"), (3, None), (4, "d"), (5, None)]
    assert [r.problem.message for r in rows if r.problem] == [
        "line 2: 3 fields where the header has 2", "line 7: 1 fields where the header has 2",
        "line 9: 3 fields where the header has 2"]


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_media_columns_are_read_beside_the_text(tmp_path, kind):
    table = pa.table({"id": ["a", "b", "c"], "text": ["look", "", ""], "photo": ["a.png", "b.png", None]})
    path = tmp_path / f"in.{kind}"
    if kind == "parquet":
        pq.write_table(table, path)
    else:
        import pyarrow.csv as csv

        csv.write_csv(table, path)
    rows = _rows(open_input(str(path), media_columns={"photo": "--image-column"}))
    assert [r.media for r in rows] == [("a.png",), ("b.png",), (None if kind == "parquet" else "",)]
    # a row with media may have no text (its content is the media); one without either is empty
    assert [r.problem and r.problem.code for r in rows] == [None, None, "empty_content"]
    assert rows[1].text == ""
    with pytest.raises(BulkError, match=r"no column 'image' \(--image-column\)"):
        open_input(str(path), media_columns={"image": "--image-column"})
