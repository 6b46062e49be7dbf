"""`spinfc score` end to end on the embedded models (slow: each test loads a model and runs real passes).

    a bundled pack on rows of the 200-row fixture, with bad rows among them: the columns, the error rows
    --server (a live `spinfc serve`) gives the in-process run's numbers (to the CPU's rounding: rows.py)

The whole fixture (every column, SIGKILL then --resume, --ray) is test_score_fixture.py. On the CPU the reference
kernels' sums depend on which contents share a pass (by up to ~6e-6 in a logprob), so the two runs here send one
row per request, one at a time: each pass holds one content, the same in both.
"""

import json

import pyarrow.parquet as pq
import pytest

from spinfc.bulk.columns import Layout
from spinfc.bulk.questions import load_questions
from spinfc.cli import main

from packaged import load_shared

from .paths import FIXTURE, QUERIES
from .rows import assert_rows_close

pytestmark = pytest.mark.slow



def _fixture_rows(n):
    return pq.read_table(FIXTURE).slice(0, n).to_pylist()


def _by_id(path):
    return {row["id"]: row for row in pq.read_table(path).to_pylist()}


def test_a_bundled_pack_writes_its_columns_and_bad_rows_become_error_rows(tmp_path):
    lines = [json.dumps(row) for row in _fixture_rows(12)]
    lines[3:3] = [json.dumps({"id": "empty", "text": "  "}), "{this is not json",
                  json.dumps({"id": "long", "text": "word " * 5000}), json.dumps({"id": "number", "text": 42})]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out, errors = tmp_path / "out.parquet", tmp_path / "errors.jsonl"
    assert main(["score", str(source), "-o", str(out), "--pack", "spinfc/support-triage", "--errors", str(errors),
                 "--quiet"]) == 0
    table = pq.read_table(out)
    assert table.schema.names == Layout(load_questions(["spinfc/support-triage"], None, "gemma3-270m")).names
    assert table.schema.metadata[b"spinfc.system_fingerprint"].startswith(b"spinfc-")
    rows = table.to_pylist()
    assert [row["row"] for row in rows] == list(range(16))
    failed = {row["row"]: row["error_code"] for row in rows if row["error_code"]}
    assert failed == {3: "empty_content", 4: "malformed_line", 5: "max_content_tokens_exceeded", 6: "not_text"}
    assert [json.loads(line)["row"] for line in errors.read_text().splitlines()] == [3, 4, 5, 6]
    good = [row for row in rows if not row["error_code"]]
    assert len(good) == 12
    for row in good:
        assert row["support_triage__decision"] in {"security", "escalate", "refunds", "cancellations", "delivery",
                                                   "technical", "self_service", "general"}
        p = [row[f"support_triage__topic__{o}__p"] for o in ("billing", "technical", "account", "shipping",
                                                             "cancellation")]
        assert abs(sum(p) - 1) < 1e-9 and 0 <= row["support_triage__category__refund"] <= 1
    assert all(row["support_triage__topic__billing__p"] is None for row in rows if row["error_code"])


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The in-process run of 8 fixture rows with the two queries, one row per request, one at a time: what
    --server must reproduce."""
    folder = tmp_path_factory.mktemp("in-process")
    pq.write_table(pq.read_table(FIXTURE).slice(0, 8), folder / "in.parquet")
    assert main(["score", str(folder / "in.parquet"), "-o", str(folder / "out"), "--queries", QUERIES,
                 "--batch-size", "1", "--in-flight", "1", "--quiet"]) == 0
    return folder / "in.parquet", folder / "out"


def test_a_live_server_gives_the_same_numbers(in_process, tmp_path):
    from spinfc.config import EngineSettings, ServerSettings, Settings
    from spinfc.server.app import create_app
    from tests.server.live import live_server

    source, expected = in_process
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", warmup="short"),
                        server=ServerSettings(queue=1))  # 429 and Retry-After: tests/bulk/test_http_transport.py
    with live_server(create_app(settings, load_model=load_shared)) as url:
        out = tmp_path / "out.jsonl"
        assert main(["score", str(source), "-o", str(out), "--queries", QUERIES, "--server", url,
                     "--batch-size", "1", "--in-flight", "1", "--quiet"]) == 0
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert_rows_close(rows, _by_id(expected))  # the CPU's rounding aside (tests/bulk/rows.py)
    meta = json.loads((tmp_path / "out.jsonl.meta.json").read_text())
    assert meta["spinfc.system_fingerprint"] == pq.read_schema(next(expected.glob("*.parquet"))).metadata[
        b"spinfc.system_fingerprint"].decode()
