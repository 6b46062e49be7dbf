"""The acceptance run's steps: build every snapshot with its reference (child processes, side by side), quantize one
(fp8-static), serve each at defaults (a few at a time), send every kind of request, stop, read the log; then the
table. Progress is printed as it goes, each line with the seconds since the start."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from benchmarks.acceptance import kinds, report
from benchmarks.acceptance.families import BY_NAME, FAMILIES
from benchmarks.acceptance.reference import FILE
from benchmarks.acceptance.servers import ROOT, Server

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
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.smoke else "cuda:0")
    return args


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def build(name: str, directory: Path, gpu_widths: bool) -> str | None:
    """The family's snapshot and reference (reference.py in a child process); the error's tail, or None."""
    command = [sys.executable, "-m", "benchmarks.acceptance.reference", name, str(directory)]
    done = subprocess.run(command + (["--gpu-widths"] if gpu_widths else []), capture_output=True, text=True,
                          env=_env(), cwd=ROOT)
    return None if done.returncode == 0 else (done.stderr or done.stdout)[-1500:]


def quantize(directory: Path, out: Path, device: str) -> str | None:
    command = [sys.executable, "-c", "import sys; from spinfc.cli import main; sys.exit(main())", "quantize",
               str(directory), "--scheme", "fp8-static", "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=ROOT)
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
    table = report.table(rows)
    print(table, flush=True)
    results = {"device": args.device, "smoke": args.smoke, "seconds": round(time.monotonic() - STARTED, 1),
               "tolerance": kinds.TOLERANCE, "rows": rows, "passed": report.passed(rows)}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    say(f"{'every family and kind passed' if results['passed'] else 'FAILED'} in {results['seconds']:.0f} s")
    return 0 if results["passed"] else 1
