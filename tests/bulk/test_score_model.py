"""`spinfc score` end to end on the embedded models (slow: each test loads a model and runs real passes).

    a bundled pack on rows of the 200-row fixture, with bad rows among them: the columns, the error rows
    the whole 200-row fixture killed (SIGKILL) after some groups, then --resume: every row exactly once
    --server (a live `spinfc serve`) and --ray (a local Ray) give the in-process run's numbers, bit for bit

On the CPU the reference kernels' sums depend on which contents share a pass (by up to ~6e-6 in a logprob), so
the three runs send one row per request, one at a time (Ray Data cuts batches at its blocks' edges): each pass
holds one content, the same in every run.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spinfc.bulk.columns import Layout
from spinfc.bulk.questions import load_questions
from spinfc.cli import main

from .paths import FIXTURE, QUERIES, ROOT

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


def test_killed_after_some_groups_and_resumed_every_row_is_written_once(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "spinfc.cli", "score", str(FIXTURE), "-o", str(out), "--model", "smollm2-135m",
               "--queries", str(tmp_path / "q.json"), "--batch-size", "10", "--group-size", "20", "--in-flight", "2",
               "--quiet"]
    (tmp_path / "q.json").write_text(json.dumps(json.loads(Path(QUERIES).read_text())[:1]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    job = subprocess.Popen(command, env=env, cwd=ROOT)
    deadline = time.monotonic() + 900
    while len(list(out.glob("part-*.parquet"))) < 3:
        assert job.poll() is None, "the job ended before it could be killed"
        assert time.monotonic() < deadline, "no part files after 900 s"
        time.sleep(0.2)
    job.send_signal(signal.SIGKILL)
    job.wait()
    parts = sorted(out.glob("part-*.parquet"))
    written = sum(pq.read_metadata(part).num_rows for part in parts)  # every part whole: each one reads
    assert 60 <= written < 200
    assert subprocess.run(command + ["--resume"], env=env, cwd=ROOT, timeout=900).returncode == 0
    ids = pq.read_table(out, columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted(row["id"] for row in pq.read_table(FIXTURE).to_pylist())  # each once
    assert not list(out.glob(".*.tmp"))


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The in-process run of 8 fixture rows with the two queries, one row per request, one at a time: what
    --server and --ray (one actor, which takes one batch at a time) must reproduce."""
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
    with live_server(create_app(settings)) as url:
        out = tmp_path / "out.jsonl"
        assert main(["score", str(source), "-o", str(out), "--queries", QUERIES, "--server", url,
                     "--batch-size", "1", "--in-flight", "1", "--quiet"]) == 0
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert rows == _by_id(expected)
    meta = json.loads((tmp_path / "out.jsonl.meta.json").read_text())
    assert meta["spinfc.system_fingerprint"] == pq.read_schema(next(expected.glob("*.parquet"))).metadata[
        b"spinfc.system_fingerprint"].decode()


def test_ray_data_gives_the_same_rows_and_numbers(in_process, tmp_path):
    ray = pytest.importorskip("ray")
    source, expected = in_process
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        out = tmp_path / "out"
        assert main(["score", str(source), "-o", str(out), "--queries", QUERIES, "--ray", "--batch-size", "1",
                     "--errors", str(tmp_path / "errors.jsonl"), "--quiet"]) == 0
    finally:
        ray.shutdown()
    got, want = _by_id(out), _by_id(expected)
    assert set(got) == set(want)
    for row_id, row in got.items():
        assert row["row"] is None
        assert {k: v for k, v in row.items() if k != "row"} == {k: v for k, v in want[row_id].items() if k != "row"}
    assert pq.read_schema(next(out.glob("*.parquet"))).metadata[b"spinfc.system_fingerprint"] == pq.read_schema(
        next(expected.glob("*.parquet"))).metadata[b"spinfc.system_fingerprint"]
