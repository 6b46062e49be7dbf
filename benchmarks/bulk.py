"""Bulk scoring on the CPU: `spinfc score` in this process against the same job through /v1/score.

    python benchmarks/bulk.py [--rows 200] [--model gemma3-270m] [--pack spinfc/support-triage] [--port 8123]
                              [--json benchmarks/results/bulk_cpu.json]

One run, the same rows of fixtures/support-messages.parquet and the same questions (a bundled pack), three ways,
each with the command's defaults (--batch-size 32 rows per request, --in-flight 4):
  spinfc score           the command, the engine in its process (what a user runs on a file)
  spinfc score --server  the command against a `spinfc serve` this script starts (the same engine over HTTP)
  http client            a plain httpx client posting /v1/score with `inputs` batches to that server, as a user's
                         own script would (--batch-size rows per request, --in-flight requests at once)

A rate is rows (and questions) per second of the job's wall time, model loading excluded: `spinfc score`'s own
summary for the first two, the client's loop for the third. The machine's load average (`uptime`) is printed
beside each: on a shared machine the rates move with it. Every logprob of the two served paths is compared with
the in-process run's, row by row: on the CPU they differ by up to ~1e-5 (the reference kernels' sums depend on
which contents share a pass, and the three paths pack their passes differently); the fingerprints are equal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"(\d[\d,]*) rows \((\d+) errors.*in ([\d.]+) s: ([\d.]+) rows/s, ([\d.]+) questions/s")


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def score_command(args, source: Path, output: Path, *extra: str) -> dict:
    command = [sys.executable, "-m", "spinfc.cli", "score", str(source), "-o", str(output), "--pack", args.pack,
               "--model", args.model, "--batch-size", str(args.batch_size), "--in-flight", str(args.in_flight),
               *extra]
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rows, errors, seconds, rows_s, questions_s = SUMMARY.search(done.stderr).groups()
    return {"rows": int(rows.replace(",", "")), "errors": int(errors), "seconds": float(seconds),
            "rows/s": float(rows_s), "questions/s": float(questions_s), "load": load()}


async def http_client(url: str, texts: list[str], questions: dict, batch_size: int,
                      in_flight: int) -> tuple[dict, list]:
    """The job as a user's own client would send it (`questions`: the body's `packs` and/or `scoring`); retries
    429 after Retry-After. Returns the rates and the answers' `inputs`, in the order of `texts`."""
    async with httpx.AsyncClient(base_url=url, timeout=1800) as client:
        gate = asyncio.Semaphore(in_flight)

        async def one(batch: list[str]) -> dict:
            async with gate:
                while True:
                    response = await client.post("/v1/score", json={
                        "inputs": [{"messages": [{"role": "user", "content": t}]} for t in batch], **questions})
                    if response.status_code != 429:
                        response.raise_for_status()
                        return response.json()
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")))

        started = time.perf_counter()
        answers = await asyncio.gather(*(one(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)))
        seconds = time.perf_counter() - started
    asked = sum(a["usage"]["questions"] for a in answers)
    items = [item for answer in answers for item in answer["inputs"]]
    return {"rows": len(texts), "errors": 0, "seconds": round(seconds, 1), "rows/s": round(len(texts) / seconds, 2),
            "questions/s": round(asked / seconds, 1), "load": load()}, items


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


def logprobs(rows: list[dict]) -> list[list[float]]:
    """Each output row's logprob columns (the layout's order: queries, combinations, options), in input order."""
    return [[value for name, value in row.items() if name.endswith("__logprob")]
            for row in sorted(rows, key=lambda r: r["row"])]


def answer_logprobs(items: list[dict]) -> list[list[float]]:
    return [[o["logprob"] for pack in item["packs"] for r in pack["results"] for c in r["combinations"]
             for o in c["options"]] for item in items]


def gap(want: list[list[float]], got: list[list[float]]) -> float | None:
    """The largest |difference| of two runs' logprobs; None when they do not hold the same numbers of them."""
    if [len(r) for r in want] != [len(r) for r in got]:
        return None
    return max(abs(x - y) for a, b in zip(want, got) for x, y in zip(a, b))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--pack", default="spinfc/support-triage")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="spinfc-bulk-"))
    try:
        table = pq.read_table(ROOT / "fixtures" / "support-messages.parquet").slice(0, args.rows)
        pq.write_table(table, work / "in.parquet")
        print(f"start: {load()}", flush=True)
        results = {"spinfc score": score_command(args, work / "in.parquet", work / "local")}
        print("spinfc score", json.dumps(results["spinfc score"]), flush=True)
        server = start_server(args)
        try:
            url = f"http://127.0.0.1:{args.port}"
            results["spinfc score --server"] = score_command(args, work / "in.parquet", work / "remote", "--server",
                                                             url)
            print("spinfc score --server", json.dumps(results["spinfc score --server"]), flush=True)
            results["http client"], items = asyncio.run(http_client(
                url, table.column("text").to_pylist(), {"packs": [{"id": args.pack}]}, args.batch_size,
                args.in_flight))
        finally:
            server.terminate()
            server.wait()
        local, remote = (pq.read_table(work / name) for name in ("local", "remote"))
        want = logprobs(local.to_pylist())
        gaps = {"spinfc score --server": gap(want, logprobs(remote.to_pylist())),
                "http client": gap(want, answer_logprobs(items))}
        fingerprints = {pq.read_schema(part).metadata[b"spinfc.system_fingerprint"].decode()
                        for name in ("local", "remote") for part in (work / name).glob("*.parquet")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.model}, {args.pack}, {args.rows} rows, --batch-size {args.batch_size}, --in-flight "
          f"{args.in_flight}, fingerprint {' / '.join(sorted(fingerprints))}")
    print("| path | rows | seconds | rows/s | questions/s | max logprob gap to in-process | load after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, r in results.items():
        shown = "" if name not in gaps else ("different shapes" if gaps[name] is None else f"{gaps[name]:.1e}")
        print(f"| {name} | {r['rows']} | {r['seconds']} | {r['rows/s']} | {r['questions/s']} | {shown} | "
              f"{r['load'].removeprefix('load average ')} |")
    record = {"model": args.model, "pack": args.pack, "rows": args.rows, "batch_size": args.batch_size,
              "in_flight": args.in_flight, "fingerprints": sorted(fingerprints), "results": results,
              "max_logprob_gap": gaps}
    print(json.dumps(record))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
