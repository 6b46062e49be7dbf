"""The output: part files renamed into place, --resume reading what is there, another job's output refused."""

import json

import pyarrow.parquet as pq
import pytest

from spinfc.bulk.columns import Layout
from spinfc.bulk.errors import BulkError
from spinfc.bulk.questions import load_questions
from spinfc.bulk.writers import ErrorLog, open_output

from .paths import QUERIES

LAYOUT = Layout(load_questions([], QUERIES, "gemma3-270m"))
SCHEMA = LAYOUT.schema({"spinfc.system_fingerprint": "fp-1", "spinfc.model": "gemma3-270m"})


def _rows(start, n):
    return [LAYOUT.error_row(k, f"id-{k}", "empty_content", "the text is empty") for k in range(start, start + n)]


@pytest.mark.parametrize("name", ["out", "out.jsonl"])
def test_resume_reads_what_is_there_and_refuses_without_it(tmp_path, name):
    path = str(tmp_path / name)
    output = open_output(path, SCHEMA, resume=False)
    output.write(_rows(0, 3))
    output.write(_rows(3, 2))
    output.close()
    with pytest.raises(BulkError, match="add --resume"):
        open_output(path, SCHEMA, resume=False)
    again = open_output(path, SCHEMA, resume=True)
    assert again.done.ids == {f"id-{k}" for k in range(5)}
    again.write(_rows(5, 1))
    again.close()
    if name == "out":
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == [
            "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
        table = pq.read_table(path)
        assert table.num_rows == 6 and table.schema.metadata[b"spinfc.system_fingerprint"] == b"fp-1"
    else:
        assert len((tmp_path / name).read_text().splitlines()) == 6
        assert json.loads((tmp_path / "out.jsonl.meta.json").read_text())["spinfc.system_fingerprint"] == "fp-1"


def test_another_fingerprint_is_refused(tmp_path):
    path = str(tmp_path / "out")
    output = open_output(path, SCHEMA, resume=False)
    output.write(_rows(0, 1))
    other = LAYOUT.schema({"spinfc.system_fingerprint": "fp-2", "spinfc.model": "gemma3-270m"})
    with pytest.raises(BulkError, match="another fingerprint"):
        open_output(path, other, resume=True)


def test_a_part_cut_short_by_a_kill_is_dropped(tmp_path):
    folder = tmp_path / "out"
    output = open_output(str(folder), SCHEMA, resume=False)
    output.write(_rows(0, 2))
    (folder / ".part-00001.parquet.tmp").write_bytes(b"PAR1 half a file")
    again = open_output(str(folder), SCHEMA, resume=True)
    assert not list(folder.glob(".*.tmp")) and again.next == 1 and len(again.done) == 2


def test_a_jsonl_line_cut_short_by_a_kill_is_dropped(tmp_path):
    path = tmp_path / "out.jsonl"
    output = open_output(str(path), SCHEMA, resume=False)
    output.write(_rows(0, 2))
    output.close()
    with open(path, "a") as file:
        file.write('{"id": "id-2", "row": 2, "err')
    again = open_output(str(path), SCHEMA, resume=True)
    assert again.done.ids == {"id-0", "id-1"}
    again.write(_rows(2, 1))
    again.close()
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["id-0", "id-1", "id-2"]


def test_error_log_lines(tmp_path):
    log = ErrorLog(str(tmp_path / "errors.jsonl"))
    log.write(_rows(0, 1) + [dict(_rows(1, 1)[0], error_code=None, error=None)])
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "errors.jsonl").read_text().splitlines()]
    assert lines == [{"row": 0, "id": "id-0", "code": "empty_content", "reason": "the text is empty"}]
