"""`spinfc score` on the whole 200-row Parquet fixture with a bundled pack, through the command a user runs (a
subprocess of the installed `spinfc`), on the smallest embedded model (slow: each run loads it and scores 200 rows).

    uninterrupted    one run (shared by the tests): every row, every column the pack asks for, the metadata
    killed, resumed  SIGKILL once >= 100 rows are written, then --resume: every id once, the uninterrupted numbers
    --ray            a local Ray, one engine actor: the same rows and numbers

The numbers are compared bit for bit. On the CPU the reference kernels' sums depend on which contents share a pass
(by up to ~6e-6 in a logprob), so every run sends the same requests alone: batches of 10 rows (a divisor of the
fixture's 50-row row groups, where both the in-process reader and Ray Data cut), one in flight, each batch written
as its own group (so a kill loses at most the batch being scored, and a resumed run's batches are the
uninterrupted run's). The three runs take ~5 minutes on 2 quiet cores (benchmarks/NOTES.md, "What the bulk tests cost").
"""

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from .paths import FIXTURE, ROOT
from .rows import assert_rows_close

pytestmark = pytest.mark.slow

PACK = "spinfc/support-triage"
MODEL = "smollm2-135m"  # the smallest embedded model: 200 rows x 21 questions in ~1.5 min on 2 CPU cores
JOB = ["--pack", PACK, "--model", MODEL, "--device", "cpu", "--batch-size", "10", "--in-flight", "1",
       "--group-size", "10"]
# the installed command (the console script next to this Python), else the module it runs
_SCRIPT = Path(sys.executable).with_name("spinfc")
SPINFC = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "spinfc.cli"]
# this checkout's code wins over any other install; a local Ray, whatever RAY_ADDRESS the caller has set
ENV = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "PYTHONPATH": str(ROOT)}
TIMEOUT = 900


def score(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([*SPINFC, "score", *args], env=ENV, cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")


def pack_columns(path: Path) -> tuple[list[str], dict]:
    """The score columns docs/bulk.md promises for the pack file at `path`, in order, read from the TOML itself
    (not from spinfc's column code), and the pack as parsed."""
    pack = tomllib.loads(path.read_text())
    prefix = slug(pack["id"].split("/")[-1])
    names = []
    for question in pack["questions"]:
        placeholders = question.get("placeholders", {})
        for values in itertools.product(*placeholders.values()):
            stem = "__".join([prefix, slug(question["id"])] + (["_".join(map(slug, values))] if values else []))
            names += [f"{stem}__{slug(o)}__{f}" for o in question["options"] for f in ("p", "floor_p", "logprob")]
            names.append(f"{stem}__residual")
    names += [f"{prefix}__category__{slug(c['id'])}" for c in pack["categories"]]
    if "decision" in pack:
        names.append(f"{prefix}__decision")
    return names, pack


def rows_by_id(folder: Path) -> dict[str, dict]:
    rows = ds.dataset(folder, format="parquet").to_table().to_pylist()
    by_id = {row["id"]: row for row in rows}
    assert len(by_id) == len(rows), "an id is written more than once"
    return by_id


def metadata(folder: Path) -> set[tuple]:
    """Every part file's spinfc metadata (one set entry when all the parts agree)."""
    return {tuple(sorted((k, v) for k, v in pq.read_schema(part).metadata.items() if k.startswith(b"spinfc.")))
            for part in sorted(folder.glob("*.parquet"))}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted") / "scores.parquet"
    done = score(str(FIXTURE), "-o", str(out), *JOB)
    assert "spinfc score: 200 rows (0 errors, 0 already done) in " in done.stderr  # the summary (stderr: a file)
    return out


def test_a_bundled_pack_writes_every_column_for_every_row(uninterrupted):
    names, pack = pack_columns(ROOT / "packs" / "support-triage.toml")
    fixture = pq.read_table(FIXTURE).to_pylist()
    table = ds.dataset(uninterrupted, format="parquet").to_table()
    assert table.schema.names == ["id", "row", "error_code", "error"] + names
    rows = sorted(table.to_pylist(), key=lambda row: row["row"])
    assert [(row["row"], row["id"]) for row in rows] == [(k, row["id"]) for k, row in enumerate(fixture)]
    assert sorted(p.name for p in uninterrupted.iterdir()) == [f"part-{k:05d}.parquet" for k in range(20)]
    labels = {rule["label"] for rule in pack["decision"]["rules"]} | {pack["decision"]["default"]}
    options = {}  # each question (placeholder combination): its options' column stems
    for name in names:
        if name.endswith("__p"):
            options.setdefault(name.rsplit("__", 2)[0], []).append(name[:-len("__p")])
    first = rows[0]
    for row in rows:
        assert row["error_code"] is None and row["error"] is None
        assert all(row[name] is not None for name in names), row["id"]
        assert row[f"{slug(pack['id'].split('/')[-1])}__decision"] in labels
        for stem, question in options.items():  # p and floor_p: distributions over the options; logprob <= 0
            for field in ("p", "floor_p"):
                assert all(0 <= row[f"{o}__{field}"] <= 1 for o in question)
                assert abs(sum(row[f"{o}__{field}"] for o in question) - 1) < 1e-9, (row["id"], stem, field)
            assert all(row[f"{o}__floor_p"] == first[f"{o}__floor_p"] for o in question)  # the floor: no content
            assert all(row[f"{o}__logprob"] <= 0 for o in question)
            assert 0 <= row[f"{stem}__residual"] <= 1
    for name in names:  # the content moves the answers: no p column is the same for every row
        if name.endswith("__p"):
            assert len({row[name] for row in rows}) > 1, name
    (meta,) = metadata(uninterrupted)  # every part carries the same metadata
    meta = {k.decode(): v.decode() for k, v in meta}
    assert meta["spinfc.model"] == MODEL
    assert re.fullmatch(r"spinfc-[\w.]+-llama-[0-9a-f]{12}-float32-\w+-cpu", meta["spinfc.system_fingerprint"]), meta
    assert [c["name"] for c in json.loads(meta["spinfc.columns"])] == names


def test_killed_halfway_then_resumed_every_row_is_written_once_with_the_same_numbers(uninterrupted, tmp_path):
    out = tmp_path / "scores.parquet"
    with open(tmp_path / "killed.log", "w") as log:
        job = subprocess.Popen([*SPINFC, "score", str(FIXTURE), "-o", str(out), *JOB], env=ENV, cwd=ROOT,
                               stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + TIMEOUT
            while sum(pq.read_metadata(part).num_rows for part in out.glob("part-*.parquet")) < 100:
                assert job.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "fewer than 100 rows written in 900 s"
                time.sleep(0.1)  # a group of 10 rows takes seconds: the kill lands well before the job ends
        finally:
            job.send_signal(signal.SIGKILL)
            job.wait()
    assert job.returncode == -signal.SIGKILL
    written = sum(pq.read_metadata(part).num_rows for part in out.glob("part-*.parquet"))  # each part reads whole
    assert 100 <= written < 200 and written % 10 == 0

    done = score(str(FIXTURE), "-o", str(out), *JOB, "--resume")
    assert f"spinfc score: {200 - written} rows (0 errors, {written} already done) in " in done.stderr
    assert not list(out.glob(".*.tmp"))
    assert rows_by_id(out) == rows_by_id(uninterrupted)  # every id once, every number (and row) the same
    assert metadata(out) == metadata(uninterrupted)


def test_ray_data_on_a_local_ray_gives_the_same_rows_and_numbers(uninterrupted, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "scores.parquet"
    done = score(str(FIXTURE), "-o", str(out), *JOB, "--ray", "--actors", "1")  # a local Ray: this machine's CPUs
    said = (done.stdout + done.stderr).splitlines()  # quiet: the summary and a few of Ray's warnings, not its logs
    assert len(said) < 15 and not any("concurrency" in line and "deprecat" in line.lower() for line in said), said
    got, want = rows_by_id(out), rows_by_id(uninterrupted)
    assert all(row["row"] is None for row in got.values())  # Ray does not number rows across blocks (docs/bulk.md)
    # a Ray actor has one CPU thread: the CPU's rounding aside (tests/bulk/rows.py), the uninterrupted run's rows
    assert_rows_close({k: {**row, "row": want[k]["row"]} for k, row in got.items() if k in want}, want)
    assert got.keys() == want.keys()
    assert metadata(out) == metadata(uninterrupted)
