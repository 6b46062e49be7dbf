"""The served path against the in-process path, in one run on one GPU: the seed-shaped job (24 contents x 56
questions, harness/jobs.py, as text) at the Llama-3-8B shape (a random bf16 snapshot, harness/models.py, with a
real tokenizer), scored

    in-process   the engine `start_engine` builds (what `spinfc serve` and `spinfc score` run) in this process:
                 compile + score of the request body, a burst of one-content requests with the time of every pass
                 (the engine's `on_pass` events), and the job's passes as pre-lowered launches replayed back to back
                 (the floor of what the engine adds)
    over HTTP    `spinfc serve` of the same snapshot in a child process (harness/serving.py), sent the job as a user
                 would: one request of 24 contents; 4 concurrent requests of 6; 24 concurrent one-content requests;
                 a stream of 240 one-content requests from 32 clients (each 429 retried after its Retry-After)

and compares every HTTP score with the in-process score of the same content (bit-identical expected on CUDA: the
same snapshot, the same fingerprint, and a content's rows do not depend on its neighbours).

    python -m benchmarks.gpu_served --tokenizer DIR [--budget N --block N --pass-sizes N] [--out results.json]
    python -m benchmarks.gpu_served --tokenizer DIR --small --device cpu      # checks the script

The budget, block and pass sizes are the server's defaults unless given (then both paths get them).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.harness import clients, jobs, models, report, serving, timing

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--budget", type=int, default=None, help="rows per pass (server and in-process; default: theirs)")
ARGS.add_argument("--block", type=int, default=None, help="content alignment (server and in-process)")
ARGS.add_argument("--pass-sizes", type=int, default=None, help="launch sizes per pass (server and in-process)")
ARGS.add_argument("--layers", type=int, default=32, help="the 8B shape's layers (its widths kept)")
ARGS.add_argument("--small", action="store_true", help="a tiny model and job (checks the script, any device)")
ARGS.add_argument("--device", default="cuda:0")
ARGS.add_argument("--work", type=Path, default=None, help="where the snapshot and the log go (default: a temp dir)")
ARGS.add_argument("--out", type=Path, default=None, help="the results as JSON (also $OUT/gpu_served.json)")


def shape_settings(o) -> dict:
    """The shape settings given, as EngineSettings fields and as `spinfc serve` flags."""
    given = {"token_budget": o.budget, "block": o.block, "pass_sizes": o.pass_sizes}
    return {k: v for k, v in given.items() if v is not None}


def flags(settings: dict) -> tuple[str, ...]:
    return tuple(part for k, v in settings.items() for part in ("--" + k.replace("_", "-"), str(v)))


def in_process(o, model: Path, job: jobs.TextJob, reps: int = 3) -> dict:
    from spinfc.compiler import compile, lower_program
    from spinfc.config import EngineSettings
    from spinfc.frontend import program_from_request
    from spinfc.passes import PassContext
    from spinfc.runtime.start import start_engine

    passes: list[tuple] = []  # (when, rows used, rows launched, seconds) per pass: the engine's on_pass events
    running = start_engine(EngineSettings(model=str(model), device=o.device, **shape_settings(o)),
                           on_pass=lambda used, launched, seconds: passes.append(
                               (time.perf_counter(), used, launched, seconds)))
    engine, shapes = running.engine, running.shapes
    sync = torch.cuda.synchronize if o.device.startswith("cuda") else None

    async def score(body):
        return await engine.score(await engine.compile_async(body))

    async def burst(bodies):
        return await asyncio.gather(*(score(body) for body in bodies))

    try:
        whole = timing.best_of(lambda: asyncio.run(score(job.whole)), reps)  # warm: the floor is then cached
        scored = whole.result
        began, first = time.perf_counter(), len(passes)
        one_each = timing.best_of(lambda: asyncio.run(burst(job.one_each())), 1, warm=False)
        timeline = [(round((t - began) * 1000), used, launched) for t, used, launched, _ in passes[first:]]
        # the pre-lowered path: the same compiled passes as `spinfc compile --emit launches`, replayed back to back
        program = compile(program_from_request(job.whole, model=str(model)), PassContext(engine.tokenizer, shapes))
        launches = [launch.to(o.device) for launch in lower_program(program, shapes)]

        def replay():
            with torch.inference_mode():
                return [running.model.forward(launch) for launch in launches]
        lowered = timing.best_of(replay, reps, sync=sync)
        return {"engine_seconds": round(whole.best, 3), "engine_questions_per_s": round(whole.rate(job.questions), 1),
                "burst_seconds": round(one_each.best, 3), "burst_passes_ms_used_launched": timeline,
                "launch_sizes": [size[0] for size in shapes.launch_sizes()] if shapes.fixed else [shapes.budget],
                "prelowered_seconds": round(lowered.best, 3),
                "prelowered_questions_per_s": round(lowered.rate(job.questions), 1), "passes": len(launches),
                "scores": [scored.scores[c] for c in scored.compiled.inputs]}
    finally:
        running.stop()
        del running, engine
        if o.device.startswith("cuda"):
            torch.cuda.empty_cache()


def over_http(o, model: Path, job: jobs.TextJob, log: Path, want: list) -> dict:
    n = len(job.texts)
    patterns = {
        "one request, all contents": ([job.whole], 1, job.questions),
        "4 concurrent requests": (job.split(4), 4, job.questions),
        "one-content requests, all at once": (job.one_each(), n, job.questions),
        "stream: 10x contents from 32 clients": (job.one_each() * 10, 32, 10 * job.questions),
    }
    tolerance = 0.0 if o.device.startswith("cuda") else 1e-5  # the CPU trims a pass to the blocks it uses
    out: dict = {}
    with serving.served(model, o.device, log, args=flags(shape_settings(o))) as server:
        out["ready_seconds"] = round(server.ready_after, 1)
        clients.pattern(server.url, [job.whole], 1, job.questions)  # warm the server (and its floor cache)
        for label, (bodies, concurrency, questions) in patterns.items():
            runs = [clients.pattern(server.url, bodies, concurrency, questions) for _ in range(2)]
            best = min(runs, key=lambda r: r["seconds"])
            got = [scores for answer in best.pop("answers") for scores in clients.scores_of(answer)]
            expect = [want[i % n] for i in range(len(got))]
            gap = max(abs(x - y) for c, d in zip(got, expect) for qa, qb in zip(c, d) for x, y in zip(qa, qb))
            best["same_as_in_process"] = gap <= tolerance
            best["429_all_runs"] = sum(r["429"] for r in runs)
            out[label] = best
            print(label, best, flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    o = ARGS.parse_args(argv)
    import transformers

    work = o.work or Path(tempfile.mkdtemp(prefix="spinfc-served-"))
    model = work / "model"
    models.snapshot("llama-3-8b", model, o.tokenizer, 2 if o.small else o.layers, o.small, o.device)
    job = jobs.text_job(transformers.AutoTokenizer.from_pretrained(str(o.tokenizer)),
                        **(jobs.SMALL if o.small else {}))
    results: dict = {"contents": len(job.texts), "questions": job.questions, **shape_settings(o)}
    inproc = results["in_process"] = in_process(o, model, job)
    want = inproc.pop("scores")
    print({k: v for k, v in inproc.items() if k != "burst_passes_ms_used_launched"}, flush=True)
    served = results["served"] = over_http(o, model, job, work / "server.log", want)
    results["all_same"] = all(r["same_as_in_process"] for r in served.values() if isinstance(r, dict))
    rows = [["in-process engine", inproc["engine_seconds"], inproc["engine_questions_per_s"], 1.0,
             inproc["engine_questions_per_s"] / inproc["prelowered_questions_per_s"], None, None, None],
            [f"pre-lowered launches ({inproc['passes']} passes)", inproc["prelowered_seconds"],
             inproc["prelowered_questions_per_s"], None, 1.0, None, None, None]]
    for label, r in served.items():
        if isinstance(r, dict):
            rows.append([f"HTTP: {label}", r["seconds"], r["questions_per_s"],
                         r["questions_per_s"] / inproc["engine_questions_per_s"],
                         r["questions_per_s"] / inproc["prelowered_questions_per_s"], r["passes"], r["429_all_runs"],
                         r["same_as_in_process"]])
    print(f"\nlaunch sizes {inproc['launch_sizes']}; in-process burst of one-content requests, passes as "
          f"(ms, rows used, rows launched): {inproc['burst_passes_ms_used_launched']}")
    print(report.table(["path", "seconds", "questions/s", "of in-process engine", "of pre-lowered", "passes", "429s",
                        "same scores"], rows))
    report.write_json(results, o.out, "gpu_served.json")


if __name__ == "__main__":
    main()
