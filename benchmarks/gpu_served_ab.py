"""Two versions of spinfc served side by side in one run on one GPU: the seed-shaped job (24 contents x 56 questions,
benchmarks/job.py) at the Llama-3-8B shape (random bf16 weights, same seed in both), sent over HTTP to
`create_app` under uvicorn at default settings (only the model and device given), in three request patterns (one
request of 24 contents; 4 concurrent requests of 6; 24 concurrent one-content requests), each pattern repeated and
the best kept, the versions alternated (A, B, A, B) so drift in the machine shows as a spread rather than a bias.
Every score of B is compared with A's for the same content (bit-identical expected: the change under test must not
move a byte).

    python benchmarks/gpu_served_ab.py --tokenizer DIR --a OLD_CHECKOUT --b . [--rounds 2]

A and B are checkout roots (each holding `spinfc/`); this script and the benchmark helpers (job.py, gpu_job.py)
come from this checkout, so only the package under test differs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--a", type=Path, required=True, help="the baseline checkout's root")
ARGS.add_argument("--b", type=Path, required=True, help="the checkout under test's root")
ARGS.add_argument("--rounds", type=int, default=2, help="A, B alternations")
ARGS.add_argument("--reps", type=int, default=3, help="runs of each pattern per server start (best kept)")
ARGS.add_argument("--small", action="store_true", help="a tiny model and job (checks the script, any device)")
ARGS.add_argument("--device", default="cuda:0")
ARGS.add_argument("--port", type=int, default=8393)
ARGS.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)  # the child: serve this root


def serve(root: Path, name: str, small: bool, device: str, port: int) -> None:
    """The child: the app of the checkout at `root` (first on sys.path), the random model, uvicorn."""
    sys.path[:0] = [str(root), str(HERE)]
    import spinfc  # first: gpu_served puts this checkout on sys.path when imported, and spinfc must come from root

    import uvicorn
    from benchmarks.gpu_served import random_model
    from spinfc.config import EngineSettings, ServerSettings, Settings
    from spinfc.server.app import create_app

    print(f"serving spinfc from {Path(spinfc.__file__).parent}", flush=True)
    settings = Settings(engine=EngineSettings(model=name, device=device), server=ServerSettings(port=port))
    app = create_app(settings, load_model=lambda n, dtype, d: random_model(name, small, d))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def measure(o, root: Path, job: dict, name: str) -> dict:
    from benchmarks.gpu_served import pattern, scores_of

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, __file__, "--serve", str(root), "--tokenizer", name, "--a", ".", "--b", ".",
               "--device", o.device, "--port", str(o.port)] + (["--small"] if o.small else [])
    child = subprocess.Popen(command, env=env)
    base = f"http://127.0.0.1:{o.port}"
    try:
        ready = wait_ready(base, child)
        n, q = len(job["texts"]), job["questions_per_content"]
        step = max(1, n // 4)
        six = [{"inputs": job["whole"]["inputs"][i:i + step], "scoring": job["whole"]["scoring"]}
               for i in range(0, n, step)]
        patterns = {
            "one request, 24 contents": [job["whole"]],
            "4 concurrent requests of 6": six,
            "24 one-content requests at once": [job["one"](t) for t in job["texts"]],
        }
        asyncio.run(pattern(base, [job["whole"]], 1, n * q))  # warm (and the floor cached)
        out = {"ready_s": round(ready, 1), "patterns": {}, "scores": None}
        for label, bodies in patterns.items():
            runs = [asyncio.run(pattern(base, bodies, len(bodies), n * q)) for _ in range(o.reps)]
            best = min(runs, key=lambda r: r["seconds"])
            got = []
            for answer in best["answers"]:
                got += scores_of(answer)
            out["patterns"][label] = {"questions_per_s": best["questions_per_s"], "passes": best["passes"],
                                      "429": sum(r["429"] for r in runs),
                                      "all_q_per_s": [r["questions_per_s"] for r in runs]}
            out["scores"] = out["scores"] or got
            out["patterns"][label]["same_as_one_request"] = got == out["scores"]
            print(f"  {label}: {best['questions_per_s']:,.1f} q/s (runs {out['patterns'][label]['all_q_per_s']})",
                  flush=True)
        return out
    finally:
        child.terminate()
        child.wait(60)


def wait_ready(base: str, child, limit: float = 500) -> float:
    import httpx

    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        if child.poll() is not None:
            raise RuntimeError(f"the server process exited with {child.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                return time.perf_counter() - began
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError("the server did not become ready")


def main(argv: list[str] | None = None) -> int:
    o = ARGS.parse_args(argv)
    name = str(o.tokenizer)
    if o.serve is not None:
        serve(o.serve, name, o.small, o.device, o.port)
        return 0
    sys.path[:0] = [str(o.b.resolve()), str(HERE)]
    from benchmarks.gpu_served import TIMELINE, job_bodies, model_folder

    TIMELINE.unlink(missing_ok=True)  # no per-request marks: neither server records them
    folder = model_folder(o.tokenizer, Path("/tmp/spinfc-ab-model"))
    name = str(folder)
    job = job_bodies(name, o.small)
    results: dict = {"a": [], "b": []}
    for round_ in range(o.rounds):
        for side in ("a", "b"):
            root = getattr(o, side).resolve()
            print(f"round {round_ + 1}, {side.upper()} ({root}) ...", flush=True)
            results[side].append(measure(o, root, job, name))
    failed = []
    want = results["a"][0]["scores"]
    for side in ("a", "b"):
        for r in results[side]:
            if r["scores"] != want:
                gap = max(abs(x - y) for c, d in zip(r["scores"], want) for qa, qb in zip(c, d) for x, y in zip(qa, qb))
                failed.append(f"{side.upper()}'s scores differ from A's first run (max {gap:.3g})")
            if not all(p["same_as_one_request"] for p in r["patterns"].values()):
                failed.append(f"{side.upper()}: a request pattern's scores differ from the one-request pattern's")
    print("\n| pattern | A questions/s (each round) | B questions/s (each round) | B / A (best of each) |")
    print("| --- | ---: | ---: | ---: |")
    for label in results["a"][0]["patterns"]:
        a = [r["patterns"][label]["questions_per_s"] for r in results["a"]]
        b = [r["patterns"][label]["questions_per_s"] for r in results["b"]]
        print(f"| {label} | {', '.join(f'{x:,.0f}' for x in a)} | {', '.join(f'{x:,.0f}' for x in b)} | "
              f"{max(b) / max(a):.3f} |")
    print(f"ready: A {[r['ready_s'] for r in results['a']]} s, B {[r['ready_s'] for r in results['b']]} s")
    for failure in dict.fromkeys(failed):
        print("FAILED:", failure)
    print("scores:", "differ" if failed else "bit-identical between A and B, every pattern")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
