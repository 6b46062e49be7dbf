"""Two checkouts' `spinfc serve` side by side in one run on one GPU: the seed-shaped job (24 contents x 56
questions, harness/jobs.py) at the Llama-3-8B shape (a random bf16 snapshot written once by this checkout, so both
serve the same bytes), each server started as a user starts it (`spinfc serve DIR --device cuda:0`, defaults) from
its own checkout, sent three request patterns over HTTP (one request of 24 contents; 4 concurrent requests of 6;
24 concurrent one-content requests), each repeated and the best kept, the checkouts alternated (A, B, A, B) so
drift in the machine shows as a spread rather than a bias. Every score of B is compared with A's for the same
content (bit-identical expected on CUDA: the change under test must not move a byte; within 1e-5 on the CPU, whose
passes are trimmed to the blocks they use, so a content's logprobs may move in the last digits with its pass).

    python -m benchmarks.gpu_served_ab --tokenizer DIR --a OLD_CHECKOUT --b . [--rounds 2]
    python -m benchmarks.gpu_served_ab --tokenizer DIR --a . --b . --small --device cpu --rounds 1   # checks it

A and B are checkout roots (each holding `spinfc/`); the model, the job and the client come from this checkout, so
only the server under test differs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import clients, jobs, models, report, serving

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--a", type=Path, required=True, help="the baseline checkout's root")
ARGS.add_argument("--b", type=Path, required=True, help="the checkout under test's root")
ARGS.add_argument("--rounds", type=int, default=2, help="A, B alternations")
ARGS.add_argument("--reps", type=int, default=3, help="runs of each pattern per server start (best kept)")
ARGS.add_argument("--layers", type=int, default=32, help="the 8B shape's layers (its widths kept)")
ARGS.add_argument("--small", action="store_true", help="a tiny model and job (checks the script, any device)")
ARGS.add_argument("--device", default="cuda:0")
ARGS.add_argument("--work", type=Path, default=None, help="where the snapshot and the logs go (default: a temp dir)")
ARGS.add_argument("--out", type=Path, default=None, help="the results as JSON (also $OUT/gpu_served_ab.json)")


def patterns(job: jobs.TextJob) -> dict[str, list[dict]]:
    return {"one request, all contents": [job.whole], "4 concurrent requests": job.split(4),
            "one-content requests at once": job.one_each()}


def measure(o, root: Path, model: Path, job: jobs.TextJob, log: Path) -> dict:
    """One server start of the checkout at `root`: each pattern `o.reps` times, the best kept, every score."""
    with serving.served(model, o.device, log, root=root) as server:
        clients.pattern(server.url, [job.whole], 1, job.questions)  # warm (and the floor cached)
        out = {"ready_s": round(server.ready_after, 1), "patterns": {}, "scores": None}
        for label, bodies in patterns(job).items():
            runs = [clients.pattern(server.url, bodies, len(bodies), job.questions) for _ in range(o.reps)]
            best = min(runs, key=lambda r: r["seconds"])
            got = [scores for answer in best["answers"] for scores in clients.scores_of(answer)]
            out["scores"] = out["scores"] or got
            tolerance = 0.0 if o.device.startswith("cuda") else 1e-5
            out["patterns"][label] = {"questions_per_s": best["questions_per_s"], "passes": best["passes"],
                                      "429": sum(r["429"] for r in runs),
                                      "all_q_per_s": [r["questions_per_s"] for r in runs],
                                      "same_as_one_request": gap(got, out["scores"]) <= tolerance}
            print(f"  {label}: {best['questions_per_s']:,.1f} q/s (runs {out['patterns'][label]['all_q_per_s']})",
                  flush=True)
        return out


def gap(got: list, want: list) -> float:
    """The largest |difference| of two [content][query][option] score lists (inf when their shapes differ)."""
    pairs = [(x, y) for c, d in zip(got, want) for qa, qb in zip(c, d) for x, y in zip(qa, qb)]
    same_shape = [len(q) for c in got for q in c] == [len(q) for c in want for q in c]
    return max((abs(x - y) for x, y in pairs), default=0.0) if same_shape else float("inf")


def failures(results: dict, tolerance: float) -> list[str]:
    failed, want = [], results["a"][0]["scores"]
    for side in ("a", "b"):
        for r in results[side]:
            if gap(r["scores"], want) > tolerance:
                failed.append(f"{side.upper()}'s scores differ from A's first run (max {gap(r['scores'], want):.3g})")
            if not all(p["same_as_one_request"] for p in r["patterns"].values()):
                failed.append(f"{side.upper()}: a request pattern's scores differ from the one-request pattern's")
    return list(dict.fromkeys(failed))


def main(argv: list[str] | None = None) -> int:
    o = ARGS.parse_args(argv)
    import transformers

    work = o.work or Path(tempfile.mkdtemp(prefix="spinfc-ab-"))
    model = work / "model"
    params = models.snapshot("llama-3-8b", model, o.tokenizer, 2 if o.small else o.layers, o.small, o.device)
    print(f"snapshot: {params / 1e9:.2f} B non-embedding parameters in {model}", flush=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(o.tokenizer))
    job = jobs.text_job(tokenizer, **(jobs.SMALL if o.small else {}))
    results: dict = {"a": [], "b": []}
    for round_ in range(o.rounds):
        for side in ("a", "b"):
            root = getattr(o, side).resolve()
            print(f"round {round_ + 1}, {side.upper()} ({root}) ...", flush=True)
            results[side].append(measure(o, root, model, job, work / "logs" / f"{side}{round_ + 1}.log"))
    failed = failures(results, 0.0 if o.device.startswith("cuda") else 1e-5)
    rows = []
    for label in results["a"][0]["patterns"]:
        a = [r["patterns"][label]["questions_per_s"] for r in results["a"]]
        b = [r["patterns"][label]["questions_per_s"] for r in results["b"]]
        rows.append([label, ", ".join(f"{x:,.0f}" for x in a), ", ".join(f"{x:,.0f}" for x in b), max(b) / max(a)])
    print("\n" + report.table(["pattern", "A questions/s (each round)", "B questions/s (each round)",
                               "B / A (best of each)"], rows))
    print(f"ready: A {[r['ready_s'] for r in results['a']]} s, B {[r['ready_s'] for r in results['b']]} s")
    for failure in failed:
        print("FAILED:", failure)
    print("scores:", "differ" if failed else "the same in A and B, every pattern"
          + (" (bit-identical)" if o.device.startswith("cuda") else " (within 1e-5 on the CPU)"))
    for side in ("a", "b"):
        for r in results[side]:
            r.pop("scores")
    report.write_json({**results, "failed": failed, "questions": job.questions}, o.out, "gpu_served_ab.json")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
