"""The acceptance run's steps: build every snapshot with its reference (child processes, side by side), quantize one
(fp8-static), serve each at defaults (a few at a time), send every kind of request, stop, read the log; then the
table. Progress is printed as it goes, each line with the seconds since the start."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from benchmarks.acceptance import kinds, report, timed
from benchmarks.acceptance.families import BY_NAME, FAMILIES
from benchmarks.acceptance.reference import FILE
from benchmarks.harness import models
from benchmarks.harness.serving import ROOT, Server, env_for, spinfc_command

STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[acceptance {time.monotonic() - STARTED:5.0f}s] {message}", flush=True)


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.acceptance", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the CPU half: tiny widths, --device cpu")
    parser.add_argument("--device", default=None, help="default: cuda:0 (cpu with --smoke)")
    parser.add_argument("--only", nargs="+", choices=sorted(BY_NAME), default=None, help="these families alone")
    parser.add_argument("--fp8", default="llama", choices=[*sorted(BY_NAME), "none"],
                        help="the family also served as an fp8-static checkpoint (default llama; none: skip)")
    parser.add_argument("--parallel", type=int, default=None, help="servers at once (default: all on CUDA, 2 on CPU)")
    parser.add_argument("--ready-timeout", type=float, default=420.0, help="seconds a server may take to be ready")
    parser.add_argument("--work", type=Path, default=None, help="where snapshots and logs go (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--timed", nargs="*", default=None, choices=sorted(models.SHAPES),
                        help="the large shapes to time (default: all on CUDA; llama-3-8b and qwen3_5-27b, tiny, with "
                             "--smoke); give none to skip")
    parser.add_argument("--timed-layers", type=int, default=None, help="layers of each large shape (default 8; 4 with "
                                                                        "--smoke)")
    parser.add_argument("--timed-parallel", type=int, default=2,
                        help="large shapes served at once (default 2: each server's content cache takes a quarter of "
                             "the device memory free at its start, so five at once run an 80 GB card out of memory)")
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="the large shapes' tokenizer folder (default: SmolLM2's, from its package)")
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.smoke else "cuda:0")
    if args.timed is None:
        args.timed = ["llama-3-8b", "qwen3_5-27b"] if args.smoke else sorted(models.SHAPES)
    args.timed_layers = args.timed_layers or (4 if args.smoke else 8)  # Qwen3.5 keeps a full-attention layer
    return args


def tokenizer_folder(args, work: Path) -> Path:
    if args.tokenizer is not None:
        return args.tokenizer
    return models.tokenizer_folder("smollm2-135m", work / "tokenizer")


def build_timed(args, work: Path) -> dict:
    """shape -> (snapshot folder, non-embedding parameters) or an error string; built one after the other."""
    tokenizer = tokenizer_folder(args, work)
    built = {}
    for name in args.timed:
        try:
            params = models.snapshot(name, work / "timed" / name, tokenizer, args.timed_layers, args.smoke,
                                     args.device)
            built[name] = (work / "timed" / name, params)
            say(f"{name}: large shape built ({params / 1e9:.2f} B non-embedding parameters)")
        except Exception as error:  # noqa: BLE001: reported in the table
            built[name] = f"{type(error).__name__}: {error}"[:300]
            say(f"{name}: LARGE SHAPE BUILD FAILED: {built[name]}")
    return built


def serve_and_time(built: dict, args, work: Path) -> list[dict]:
    """The large shapes served `args.timed_parallel` at a time (starting is mostly compiling), each timed alone on
    the device once ready, its server stopped before the next is timed."""
    tokenizer = tokenizer_folder(args, work)
    rows = [{"shape": name, "error": entry} for name, entry in built.items() if isinstance(entry, str)]
    names = [name for name, entry in built.items() if not isinstance(entry, str)]
    job = dict(contents=2, questions=4, content_tokens=40) if args.smoke else \
        dict(contents=24, questions=56, content_tokens=470)
    at_once = max(1, args.timed_parallel)
    for first in range(0, len(names), at_once):
        wave = names[first:first + at_once]
        servers = {name: Server(built[name][0], args.device, work / "logs" / f"timed-{name}.log").start()
                   for name in wave}
        try:
            rows += [time_one(name, server, built[name][1], tokenizer, job, args) for name, server in servers.items()]
        finally:
            for server in servers.values():
                server.stop()
    return rows


def time_one(name: str, server, params: int, tokenizer: Path, job: dict, args) -> dict:
    """One large shape's row: its timing beside its floor, or why it has none; its server stopped after."""
    try:
        if not server.wait_ready(args.ready_timeout):
            return {"shape": name, "error": "never ready: " + server.log()[-300:]}
        try:
            timing = timed.time_job(server.url, tokenizer, **job)
        except Exception as error:  # noqa: BLE001
            return {"shape": name, "error": f"{type(error).__name__}: {error}"[:300]}
        row = {"shape": name, "ready_after": server.ready_after,
               **timed.with_floor(timing, params, args.timed_layers)}
        say(f"{name}: {row['questions_per_s']:,.0f} questions/s, {row['of_floor']:.2f} of the floor")
        return row
    finally:
        server.stop()


def build(name: str, directory: Path, gpu_widths: bool) -> str | None:
    """The family's snapshot and reference (reference.py in a child process); the error's tail, or None."""
    command = [sys.executable, "-m", "benchmarks.acceptance.reference", name, str(directory)]
    done = subprocess.run(command + (["--gpu-widths"] if gpu_widths else []), capture_output=True, text=True,
                          env=env_for(), cwd=ROOT)
    return None if done.returncode == 0 else (done.stderr or done.stdout)[-1500:]


def quantize(directory: Path, out: Path, device: str) -> str | None:
    done = spinfc_command("quantize", str(directory), "--scheme", "fp8-static", "-o", str(out), check=False)
    if done.returncode == 0:
        (out / FILE).write_text((directory / FILE).read_text())
    return None if done.returncode == 0 else (done.stderr or done.stdout)[-1500:]


def serve_and_check(name: str, directory: Path, media: tuple, args, work: Path) -> dict:
    server = Server(directory, args.device, work / "logs" / f"{name}.log").start()
    say(f"{name}: spinfc serve started on port {server.port}")
    row = {"family": name, "checks": [], "ready_after": None, "tracebacks": []}
    try:
        if not server.wait_ready(args.ready_timeout):
            tail = "\n".join(server.log().splitlines()[-15:])
            row["error"] = f"never ready (exit {server.process.poll()}):\n{tail}"
            say(f"{name}: NEVER READY\n{tail}")
            return row
        row["ready_after"] = round(server.ready_after, 1)
        say(f"{name}: ready in {server.ready_after:.0f} s; sending every kind of request")
        device = "cuda" if args.device.startswith("cuda") else "cpu"
        scheme = "fp8" if name.endswith("fp8-static") else device
        served = kinds.Served(server.url, device, media, json.loads((directory / FILE).read_text()),
                              kinds.TOLERANCE[scheme])
        row["checks"] = [attrs.asdict(check) for check in kinds.run_all(served)]
    finally:
        server.stop()
        row["tracebacks"] = server.tracebacks()
    failed = [c["kind"] for c in row["checks"] if not c["ok"]]
    say(f"{name}: {'all passed' if not failed and not row['tracebacks'] else 'FAILED ' + ', '.join(failed)}"
        f"{' (tracebacks in the log)' if row['tracebacks'] else ''}")
    return row


def main(argv=None) -> int:
    args = parse(argv)
    families = [f for f in FAMILIES if args.only is None or f.name in args.only]
    work = args.work or Path(tempfile.mkdtemp(prefix="spinfc-acceptance-"))
    cuda = args.device.startswith("cuda")
    say(f"{len(families)} families on {args.device} in {work}: building snapshots and transformers references")
    large = ThreadPoolExecutor(max_workers=1)
    large_built = large.submit(build_timed, args, work) if args.timed else None
    targets = {f.name: (work / f.name, f.media) for f in families}
    with ThreadPoolExecutor(max_workers=8 if cuda else 2) as pool:
        built = dict(zip(targets, pool.map(lambda n: build(n, targets[n][0], cuda), targets)))
    rows = [{"family": n, "checks": [], "error": f"build failed:\n{e}", "tracebacks": []}
            for n, e in built.items() if e]
    for name, error in built.items():
        say(f"{name}: {'built' if error is None else 'BUILD FAILED: ' + error[-300:]}")
    serve = {n: t for n, t in targets.items() if built[n] is None}
    if args.fp8 != "none" and args.fp8 in serve:
        out = work / f"{args.fp8}-fp8-static"
        say(f"{args.fp8}: spinfc quantize --scheme fp8-static")
        error = quantize(serve[args.fp8][0], out, args.device)
        if error is None:
            serve[f"{args.fp8}-fp8-static"] = (out, serve[args.fp8][1])
        else:
            rows.append({"family": f"{args.fp8}-fp8-static", "checks": [], "error": f"quantize failed:\n{error}",
                         "tracebacks": []})
    parallel = args.parallel or (len(serve) if cuda else 2)
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        rows += list(pool.map(lambda n: serve_and_check(n, *serve[n], args, work), serve))
    print(report.table(rows), flush=True)
    timed_rows = serve_and_time(large_built.result(), args, work) if large_built is not None else []
    if timed_rows:
        print(timed.table(timed_rows), flush=True)
    passed = report.passed(rows) and all("error" not in r for r in timed_rows)
    results = {"device": args.device, "smoke": args.smoke, "seconds": round(time.monotonic() - STARTED, 1),
               "tolerance": kinds.TOLERANCE, "rows": rows, "timed": timed_rows, "passed": passed}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    say(f"{'every family and kind passed' if results['passed'] else 'FAILED'} in {results['seconds']:.0f} s")
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
