"""Bulk scoring on the CPU: `spinfc score` in this process against the same job through /v1/score.

    python benchmarks/bulk.py [--rows 40] [--model gemma3-270m] [--pack spinfc/support-triage] [--port 8123]

One run, the same rows of fixtures/support-messages.parquet and the same questions (a bundled pack), three ways:
  spinfc score           the command, the engine in its process (what a user runs on a file)
  spinfc score --server  the command against a `spinfc serve` this script starts (the same engine over HTTP)
  http client            a plain httpx client posting /v1/score with `inputs` batches to that server, as a user's
                         own script would (--batch-size rows per request, --in-flight requests at once)

A rate is rows (and questions) per second of the job's wall time, model loading excluded: `spinfc score`'s own
summary for the first two, the client's loop for the third. The numbers of the three are compared row by row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"(\d[\d,]*) rows \((\d+) errors.*in ([\d.]+) s: ([\d.]+) rows/s, ([\d.]+) questions/s")


def score_command(args, source: Path, output: Path, *extra: str) -> dict:
    command = [sys.executable, "-m", "spinfc.cli", "score", str(source), "-o", str(output), "--pack", args.pack,
               "--model", args.model, "--batch-size", str(args.batch_size), "--in-flight", str(args.in_flight),
               *extra]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, check=True)
    rows, errors, seconds, rows_s, questions_s = SUMMARY.search(done.stderr).groups()
    return {"rows": int(rows.replace(",", "")), "errors": int(errors), "seconds": float(seconds),
            "rows/s": float(rows_s), "questions/s": float(questions_s)}


async def http_client(url: str, texts: list[str], pack: str, batch_size: int, in_flight: int) -> tuple[dict, list]:
    """The job as a user's own client would send it; retries 429 after Retry-After."""
    async with httpx.AsyncClient(base_url=url, timeout=1800) as client:
        gate = asyncio.Semaphore(in_flight)

        async def one(batch: list[str]) -> dict:
            async with gate:
                while True:
                    response = await client.post("/v1/score", json={
                        "inputs": [{"messages": [{"role": "user", "content": t}]} for t in batch],
                        "packs": [{"id": pack}]})
                    if response.status_code != 429:
                        response.raise_for_status()
                        return response.json()
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")))

        started = time.perf_counter()
        answers = await asyncio.gather(*(one(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)))
        seconds = time.perf_counter() - started
    questions = sum(a["usage"]["questions"] for a in answers)
    items = [item for answer in answers for item in answer["inputs"]]
    return {"rows": len(texts), "errors": 0, "seconds": round(seconds, 1), "rows/s": round(len(texts) / seconds, 2),
            "questions/s": round(questions / seconds, 1)}, items


def start_server(args) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "spinfc.cli", "serve", args.model, "--device", "cpu",
                               "--host", "127.0.0.1", "--port", str(args.port), "--queue", str(args.in_flight),
                               "--log-level", "warning"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 900
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{args.port}/readyz", timeout=5).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the server did not become ready")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--pack", default="spinfc/support-triage")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--port", type=int, default=8123)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spinfc-bulk-"))
    table = pq.read_table(ROOT / "fixtures" / "support-messages.parquet").slice(0, args.rows)
    pq.write_table(table, work / "in.parquet")
    results = {"spinfc score": score_command(args, work / "in.parquet", work / "local")}
    server = start_server(args)
    try:
        url = f"http://127.0.0.1:{args.port}"
        results["spinfc score --server"] = score_command(args, work / "in.parquet", work / "remote", "--server", url)
        results["http client"], items = asyncio.run(
            http_client(url, table.column("text").to_pylist(), args.pack, args.batch_size, args.in_flight))
    finally:
        server.terminate()
        server.wait()
    local, remote = (pq.read_table(work / name).to_pylist() for name in ("local", "remote"))
    same = sorted(local, key=lambda r: r["id"]) == sorted(remote, key=lambda r: r["id"])
    client_p = [o["p"] for item in items for r in item["packs"][0]["results"] for c in r["combinations"]
                for o in c["options"]]
    local_p = [value for row in local for name, value in row.items() if name.endswith("__p")]
    print(f"{'path':<24} {'rows':>5} {'seconds':>8} {'rows/s':>8} {'questions/s':>12}")
    for name, r in results.items():
        print(f"{name:<24} {r['rows']:>5} {r['seconds']:>8} {r['rows/s']:>8} {r['questions/s']:>12}")
    print(f"same numbers: spinfc score vs --server {same}; vs the http client {sorted(client_p) == sorted(local_p)}")
    print(json.dumps({"model": args.model, "pack": args.pack, "rows": args.rows, "batch_size": args.batch_size,
                      "in_flight": args.in_flight, "results": results}))


if __name__ == "__main__":
    main()
