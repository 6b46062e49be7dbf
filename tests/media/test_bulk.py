"""`spinfc score` with media columns (spinfc/bulk/media.py) on the random-weight Gemma 4 snapshot with its towers:
image, audio and video (frames) columns of paths are read after the text and change the scores; a path outside the
allowed folders (or a link out of them), a missing file, a URL of a host not allowed and an image over
--max-image-pixels are error rows, the others scored; the same job through --server, and under --ray, gives the
same numbers; a URL of an allowed host is fetched."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from spinfc.cli import main

from .snapshots import png, wav

pytestmark = pytest.mark.slow  # loads the snapshot's engine (a few seconds) and runs real passes

QUERIES = {"queries": [{"id": "shown", "template": "\nAnswer:<?>", "options": [" yes", " no"]}]}
P = "q__shown__yes__p"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A JSONL job in its own folder, its media beside it (and one file outside it)."""
    root = tmp_path_factory.mktemp("bulk-media")
    folder = root / "job"
    (folder / "media").mkdir(parents=True)
    (folder / "media" / "a.png").write_bytes(png(40, 28, 0))
    (folder / "media" / "b.png").write_bytes(png(40, 28, 1))
    (folder / "media" / "big.png").write_bytes(png(60, 60, 2))
    (folder / "media" / "clip.wav").write_bytes(wav(0.5))
    for k in range(4):
        (folder / "media" / f"f{k}.png").write_bytes(png(24, 24, k))
    (root / "secret.png").write_bytes(png(40, 28, 3))
    (folder / "media" / "link.png").symlink_to(root / "secret.png")  # inside the folder, pointing out of it
    rows = [
        {"id": "a", "text": "Look:", "photo": "media/a.png"},
        {"id": "a-again", "text": "Look:", "photo": str(folder / "media" / "a.png")},
        {"id": "b", "text": "Look:", "photo": "media/b.png"},
        {"id": "outside", "text": "Look:", "photo": "../secret.png"},
        {"id": "link", "text": "Look:", "photo": "media/link.png"},
        {"id": "url", "text": "Look:", "photo": "https://example.com/cat.png"},
        {"id": "missing", "text": "Look:", "photo": "media/nothing.png"},
        {"id": "big", "text": "Look:", "photo": "media/big.png"},
        {"id": "clip", "text": "Listen:", "clip": "media/clip.wav"},
        {"id": "frames", "text": "Watch:", "frames": [f"media/f{k}.png" for k in range(4)]},
        {"id": "text", "text": "Look:"},
        {"id": "image-only", "text": "", "photo": "media/a.png"},
    ]
    blank = {"photo": None, "clip": None, "frames": None}  # every key in every object (the first names the columns)
    (folder / "in.jsonl").write_text("".join(json.dumps({**blank, **row}) + "\n" for row in rows))
    (folder / "queries.json").write_text(json.dumps(QUERIES))
    return folder


def score(folder, model_dir, out: str, *more: str) -> dict:
    assert main(["score", str(folder / "in.jsonl"), "-o", str(folder / out), "--queries", str(folder / "queries.json"),
                 "--model", str(model_dir), "--device", "cpu", "--token-budget", "1024", "--image-column", "photo",
                 "--audio-column", "clip", "--video-column", "frames", "--max-image-pixels", "2000", "--quiet",
                 *more]) == 0
    return {row["id"]: row for row in pq.read_table(folder / out).to_pylist()}


@pytest.fixture(scope="module")
def in_process(job, gemma4_directory):
    return score(job, gemma4_directory, "out")


def test_media_columns_are_read_and_bad_media_are_error_rows(in_process):
    rows = in_process
    failed = {row_id: row["error_code"] for row_id, row in rows.items() if row["error_code"]}
    assert failed == {"outside": "media_path_refused", "link": "media_path_refused", "url": "media_url_refused",
                      "missing": "media_not_found", "big": "max_image_pixels_exceeded"}
    assert "--media-root" in rows["outside"]["error"] and "--media-fetch-hosts" in rows["url"]["error"]
    assert rows["a"][P] == pytest.approx(rows["a-again"][P], abs=1e-5)  # a relative and an absolute path
    assert len({round(rows[k][P], 6) for k in ("a", "b", "clip", "frames", "text")}) == 5  # each read: its own score
    assert 0 < rows["image-only"][P] < 1


def test_the_same_job_through_a_server_gives_the_same_numbers(in_process, job, gemma4_directory):
    from spinfc.config import EngineSettings, Limits, Settings
    from spinfc.server.app import create_app
    from tests.server.live import live_server

    settings = Settings(engine=EngineSettings(model=str(gemma4_directory), device="cpu", token_budget=1024,
                                              warmup="none"),
                        limits=Limits(max_image_pixels=2000))  # the server decodes the files: its limits apply
    with live_server(create_app(settings)) as url:
        rows = score(job, gemma4_directory, "served", "--server", url)
    assert {k: r["error_code"] for k, r in rows.items()} == {k: r["error_code"] for k, r in in_process.items()}
    for row_id, row in rows.items():
        if not row["error_code"]:
            assert row[P] == pytest.approx(in_process[row_id][P], abs=1e-5), row_id


def test_a_url_of_an_allowed_host_is_fetched(in_process, job, gemma4_directory, tmp_path):
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(job))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/media/a.png"
        row = {"id": "fetched", "text": "Look:", "photo": url, "clip": None, "frames": None}
        (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
        (tmp_path / "queries.json").write_text(json.dumps(QUERIES))
        refused = score(tmp_path, gemma4_directory, "refused")["fetched"]
        fetched = score(tmp_path, gemma4_directory, "fetched", "--media-fetch-hosts", "127.0.0.1")["fetched"]
    finally:
        server.shutdown()
    assert refused["error_code"] == "media_url_refused"
    assert fetched["error_code"] is None and fetched[P] == pytest.approx(in_process["a"][P], abs=1e-5)


def test_ray_data_reads_the_media_columns_as_the_in_process_run(in_process, job, gemma4_directory):
    """The same job under --ray (a local Ray, one CPU actor, through the installed command): the media read in the
    actor under the same roots and limits, the same error rows, the numbers within the CPU tolerance."""
    pytest.importorskip("ray")
    import os
    import subprocess

    from tests.bulk.paths import ROOT
    from tests.bulk.rows import assert_rows_close
    from tests.bulk.test_score_fixture import SPINFC

    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*SPINFC, "score", str(job / "in.jsonl"), "-o", str(job / "ray"), "--queries",
                           str(job / "queries.json"), "--model", str(gemma4_directory), "--device", "cpu",
                           "--token-budget", "1024", "--image-column", "photo", "--audio-column", "clip",
                           "--video-column", "frames", "--max-image-pixels", "2000", "--quiet", "--ray",
                           "--actors", "1"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["id"]: row for row in pq.read_table(job / "ray").to_pylist()}
    assert all(row["row"] is None for row in rows.values())  # Ray does not number rows (docs/bulk.md)
    assert_rows_close({k: {**row, "row": in_process[k]["row"]} for k, row in rows.items()}, in_process)
