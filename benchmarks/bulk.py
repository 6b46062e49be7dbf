"""Bulk scoring on the CPU: `spinfc score` in this process against the same job through /v1/score.

    python -m benchmarks.bulk [--rows 200] [--model gemma3-270m] [--pack spinfc/support-triage]
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
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.harness.clients import batches
from benchmarks.harness.serving import ROOT, served, spinfc_command

SUMMARY = re.compile(r"(\d[\d,]*) rows \((\d+) errors.*in ([\d.]+) s: ([\d.]+) rows/s, ([\d.]+) questions/s")


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def score_command(source: Path, output: Path, *flags: str) -> dict:
    """`spinfc score SOURCE -o OUTPUT FLAGS...` as a user runs it; its own summary's rows, errors and rates."""
    done = spinfc_command("score", str(source), "-o", str(output), *flags)
    rows, errors, seconds, rows_s, questions_s = SUMMARY.search(done.stderr).groups()
    return {"rows": int(rows.replace(",", "")), "errors": int(errors), "seconds": float(seconds),
            "rows/s": float(rows_s), "questions/s": float(questions_s), "load": load()}


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
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="spinfc-bulk-"))
    try:
        table = pq.read_table(ROOT / "fixtures" / "support-messages.parquet").slice(0, args.rows)
        pq.write_table(table, work / "in.parquet")
        print(f"start: {load()}", flush=True)
        flags = ("--pack", args.pack, "--model", args.model, "--batch-size", str(args.batch_size), "--in-flight",
                 str(args.in_flight))
        results = {"spinfc score": score_command(work / "in.parquet", work / "local", *flags)}
        print("spinfc score", json.dumps(results["spinfc score"]), flush=True)
        with served(args.model, "cpu", work / "server.log",
                    args=("--queue", str(args.in_flight), "--log-level", "warning")) as server:
            results["spinfc score --server"] = score_command(work / "in.parquet", work / "remote", *flags,
                                                             "--server", server.url)
            print("spinfc score --server", json.dumps(results["spinfc score --server"]), flush=True)
            timed, answers = batches(server.url, table.column("text").to_pylist(), {"packs": [{"id": args.pack}]},
                                     args.batch_size, args.in_flight)
            results["http client"] = {**timed, "load": load()}
            items = [item for answer in answers for item in answer["inputs"]]
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
