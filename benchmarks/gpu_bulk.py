"""`spinfc score` on one GPU at the Llama-3-8B shape: rows/s and questions/s of the bulk job in the process,
against a server (`spinfc score --server`) and against a plain client posting /v1/score, in one run.

    python -m benchmarks.gpu_bulk --tokenizer DIR [--out benchmarks/results/gpu_bulk_h200.json]
    python -m benchmarks.gpu_bulk --tokenizer DIR --small --device cpu     # checks the script (tiny model, rows)

The model is a random-weight snapshot at the Llama-3-8B shape (harness/models.py; every path loads the same
files), SmolLM2's tokenizer from DIR, the precision `spinfc serve` defaults to (fp16-mixed on CUDA). Two jobs, each a
Parquet file and a --queries file:

    support   fixtures/support-messages.parquet repeated to --support-rows (2,000) rows of short messages, asked the 16
              questions of packs/support-triage.toml as queries (21 with its placeholders; packs are enabled per
              model, and this model has no name the bundled packs list)
    news      --news-rows (480) news-length contents (~470 tokens, harness/jobs.py), asked its 56
              yes/no questions: the seed's shape, as a file

and three paths for each, with the CLI's defaults (--batch-size 32, --in-flight 4, a 16,384-token pass):

    in-process      the `spinfc score` command with the engine in its process
    --server        the `spinfc score --server URL` command against `spinfc serve DIR` (harness/serving.py; default
                    admission; 429s retried after Retry-After)
    http client     a plain httpx client (harness/clients.py `batches`): 32 rows per POST /v1/score, 4 in flight

A rate is rows (questions) over the job's wall time, model loading excluded (the command's own summary; the
client's loop). Every logprob of the two served paths is compared with the in-process run's: on CUDA they are
expected bit-identical (same fingerprint; a content's rows do not depend on its neighbours). Everything the run
writes (the model folder, the inputs, the outputs) is under benchmarks/results/.gpu-bulk-work, removed at the end;
the results go to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tomllib
from pathlib import Path

from benchmarks.bulk import score_command
from benchmarks.harness import models
from benchmarks.harness.clients import batches
from benchmarks.harness.serving import ROOT, served

WORK = ROOT / "benchmarks" / "results" / ".gpu-bulk-work"

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--device", default="cuda:0")
ARGS.add_argument("--support-rows", type=int, default=2000)
ARGS.add_argument("--news-rows", type=int, default=480)
ARGS.add_argument("--small", action="store_true", help="a tiny model and few rows (checks the script, any device)")
ARGS.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_bulk_h200.json")

NEEDED = ("torch", "pyarrow", "httpx", "msgspec", "litestar", "lark", "uvicorn")


# ---- the jobs ----------------------------------------------------------------------------------------------------


def pack_queries(path: Path) -> list[dict]:
    """A pack's questions as /v1/score queries (id, template, options, placeholders)."""
    pack = tomllib.loads(path.read_text())
    return [{k: q[k] for k in ("id", "template", "options", "placeholders") if k in q} for q in pack["questions"]]


def write_jobs(name: str, o) -> dict[str, dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from benchmarks.harness.jobs import content, request_body

    from spinfc.registry import load_tokenizer

    support_rows, news_rows = (40, 8) if o.small else (o.support_rows, o.news_rows)
    messages = pq.read_table(ROOT / "fixtures" / "support-messages.parquet").to_pylist()
    support = [{"id": f"{m['id']}-{k // len(messages)}", "text": m["text"]}
               for k, m in ((k, messages[k % len(messages)]) for k in range(support_rows))]
    tokenizer = load_tokenizer(name)
    articles = {}  # content(i) rotates 12 paragraphs: a dateline makes every row's text its own
    news = [{"id": f"news-{i:05d}", "text": f"Report {i + 1}. " + articles.setdefault(i % 12, content(i, tokenizer))}
            for i in range(news_rows)]
    news_queries = request_body(["-"])["scoring"]["queries"]
    support_queries = pack_queries(ROOT / "packs" / "support-triage.toml")
    if o.small:
        news_queries, support_queries = news_queries[:6], support_queries[:4]
    jobs = {}
    for job, rows, queries in (("support", support, support_queries), ("news", news, news_queries)):
        folder = WORK / job
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "in.parquet")
        (folder / "queries.json").write_text(json.dumps(queries))
        jobs[job] = {"input": folder / "in.parquet", "queries": folder / "queries.json", "rows": len(rows),
                     "texts": [r["text"] for r in rows], "query_list": queries}
    return jobs


# ---- the three paths -----------------------------------------------------------------------------------------------


def command_path(name: str, job: dict, out: Path, o, *flags: str) -> dict:
    """`spinfc score INPUT -o OUT --queries Q --model DIR` as a user runs it: the engine in its process, or
    `--server URL`'s."""
    r = score_command(job["input"], out, "--queries", str(job["queries"]), "--model", name, "--device", o.device,
                      "--progress-interval", "1000", *flags)
    return rate(r["rows"], (r["rows"] - r["errors"]) * questions_per_row(job), r["seconds"])


def questions_per_row(job: dict) -> int:
    count = 0
    for query in job["query_list"]:
        n = 1
        for values in query.get("placeholders", {}).values():
            n *= len(values)
        count += n
    return count


def rate(rows: int, questions: int, seconds: float) -> dict:
    return {"rows": rows, "questions": questions, "seconds": round(seconds, 2), "rows/s": round(rows / seconds, 1),
            "questions/s": round(questions / seconds, 1)}


def logprobs_of_output(folder: Path) -> list[list[float]]:
    """Each row's logprob columns, in input order (the columns in the layout's order)."""
    import pyarrow.dataset as ds

    table = ds.dataset(folder, format="parquet").to_table()
    names = [n for n in table.schema.names if n.endswith("__logprob")]
    rows = sorted(table.to_pylist(), key=lambda r: r["row"])
    return [[r[n] for n in names] for r in rows]


def logprobs_of_answers(items: list[dict]) -> list[list[float]]:
    return [[o["logprob"] for r in item["results"] for c in r["combinations"] for o in c["options"]]
            for item in items]


def compare(want: list[list[float]], got: list[list[float]]) -> dict:
    if len(want) != len(got) or any(len(a) != len(b) for a, b in zip(want, got)):
        return {"bit_identical": False, "max_gap": None}
    gap = max(abs(x - y) for a, b in zip(want, got) for x, y in zip(a, b))
    return {"bit_identical": want == got, "max_gap": gap}


def main(argv: list[str] | None = None) -> None:
    o = ARGS.parse_args(argv)
    missing = [m for m in NEEDED if not _importable(m)]
    if missing:
        raise SystemExit(f"gpu_bulk.py needs {', '.join(missing)}: pip install {' '.join(missing)} (on a machine "
                         "without the network, from wheels)")
    import torch

    os.environ.setdefault("TRITON_CACHE_DIR", str(WORK / "triton"))  # nothing outside benchmarks/results
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    try:
        name = str(WORK / "model")
        models.snapshot("llama-3-8b", WORK / "model", o.tokenizer, 2 if o.small else None, o.small, o.device)
        jobs = write_jobs(name, o)
        device = torch.cuda.get_device_name(0) if o.device.startswith("cuda") else o.device
        results: dict = {"device": device, "torch": torch.__version__, "shape": "tiny" if o.small else "llama3-8b",
                         "jobs": {k: {"rows": j["rows"], "questions_per_row": questions_per_row(j)}
                                  for k, j in jobs.items()}, "paths": {}}
        want = {}
        for job, spec in jobs.items():
            results["paths"][f"{job}: in-process"] = r = command_path(name, spec, WORK / job / "in-process", o)
            want[job] = logprobs_of_output(WORK / job / "in-process")
            print(job, "in-process", json.dumps(r), flush=True)
        with served(name, o.device, WORK / "server.log", timeout=600) as server:
            results["server_ready_seconds"] = round(server.ready_after, 1)
            for job, spec in jobs.items():
                label = f"{job}: spinfc score --server"
                try:  # a failure (e.g. more 429s than the command retries) is recorded; the client still runs
                    r = command_path(name, spec, WORK / job / "server", o, "--server", server.url)
                    r.update(compare(want[job], logprobs_of_output(WORK / job / "server")))
                    results["paths"][label] = r
                except RuntimeError as error:
                    results.setdefault("failed", {})[label] = str(error)
                print(job, "--server", json.dumps(results["paths"].get(label) or results["failed"]), flush=True)
                r, answers = batches(server.url, spec["texts"], {"scoring": {"queries": spec["query_list"]}}, 32, 4)
                r = rate(r["rows"], r["rows"] * questions_per_row(spec), r["seconds"])
                r.update(compare(want[job], logprobs_of_answers([i for a in answers for i in a["inputs"]])))
                results["paths"][f"{job}: http client"] = r
                print(job, "http client", json.dumps(r), flush=True)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"\n{results['device']}, {results['shape']} shape, random weights, bf16-mixed on CUDA")
    print("| job | path | rows | seconds | rows/s | questions/s | of in-process | bit-identical (max gap) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, r in sorted(results["paths"].items(), key=lambda item: item[0].split(": ")[0] == "news"):
        job, path = label.split(": ")
        base = results["paths"][f"{job}: in-process"]["questions/s"]
        same = "" if "bit_identical" not in r else "no (other shapes)" if r["max_gap"] is None else \
            f"{'yes' if r['bit_identical'] else 'no'} ({r['max_gap']:.2g})"
        print(f"| {job} ({results['jobs'][job]['questions_per_row']} q/row) | {path} | {r['rows']:,} | "
              f"{r['seconds']} | {r['rows/s']:,} | {r['questions/s']:,} | {r['questions/s'] / base:.3f} | {same} |")
    for label, why in results.get("failed", {}).items():
        print(f"FAILED {label}: {why}")
    o.out.parent.mkdir(parents=True, exist_ok=True)
    o.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {o.out}")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()
