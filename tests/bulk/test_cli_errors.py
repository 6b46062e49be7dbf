"""Mistakes found before any model is loaded: exit status 2 and a message naming what is wrong."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spinfc.cli import main

from .paths import QUERIES



def _input(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a"], "body": ["hello"]}), path)
    return str(path)


def test_a_missing_column_is_exit_2_naming_the_columns_found(tmp_path, capsys):
    status = main(["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--queries", QUERIES])
    assert status == 2
    err = capsys.readouterr().err
    assert "has no column 'text' (--text-column); the columns are 'id', 'body'" in err
    assert not (tmp_path / "out").exists()


def test_no_questions_is_exit_2(tmp_path, capsys):
    assert main(["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body"]) == 2
    assert "no questions: give --pack" in capsys.readouterr().err


def test_an_unknown_pack_lists_the_bundled_ones(tmp_path, capsys):
    args = ["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body", "--pack", "spinfc/nope"]
    assert main(args) == 2
    assert "spinfc/support-triage" in capsys.readouterr().err


def test_a_query_with_a_mistake_is_the_frontends_error(tmp_path, capsys):
    queries = tmp_path / "q.json"
    queries.write_text('[{"id": "x", "template": "\\n\\nQ?", "options": [" yes"]}]')
    args = ["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body", "--queries", str(queries)]
    assert main(args) == 2
    assert "q.json:scoring.queries[0]" in capsys.readouterr().err


def test_an_output_with_rows_needs_resume(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-00000.parquet").write_bytes(b"")
    args = ["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body", "--queries", QUERIES]
    assert main(args) == 2
    assert "add --resume" in capsys.readouterr().err


def test_resume_is_refused_under_ray(tmp_path, capsys):
    args = ["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body", "--queries", QUERIES,
            "--ray", "--resume"]
    assert main(args) == 2
    assert "--resume is not available with --ray" in capsys.readouterr().err


def test_a_missing_media_column_is_exit_2_naming_its_flag(tmp_path, capsys):
    args = ["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body", "--queries", QUERIES,
            "--image-column", "photo"]
    assert main(args) == 2
    assert "has no column 'photo' (--image-column); the columns are 'id', 'body'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_missing_media_column_under_ray_is_exit_2_before_ray_starts(tmp_path, capsys):
    pytest.importorskip("ray")
    args = ["score", _input(tmp_path), "-o", str(tmp_path / "out"), "--text-column", "body", "--queries", QUERIES,
            "--image-column", "photo", "--ray"]
    assert main(args) == 2
    assert "has no column 'photo' (--image-column)" in capsys.readouterr().err
    import ray

    assert not ray.is_initialized()
