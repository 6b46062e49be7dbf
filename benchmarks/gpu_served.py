"""The served path against the in-process path, in one run on one GPU: the seed-shaped job (24 contents x 56
questions, benchmarks/job.py, as text) at the Llama-3-8B shape (random bf16 weights, a real tokenizer), scored

    in-process   the engine in this process: Engine.compile + Engine.score of the request body (the path every
                 caller runs), and the job's passes as pre-lowered launches replayed back to back (gpu.py's way)
    over HTTP    the app (`spinfc.server.app.create_app`, what `spinfc serve` runs) under uvicorn in a child
                 process, sent the job as a user would: one request of 24 contents; 4 concurrent requests of 6;
                 24 concurrent one-content requests; a stream of 240 one-content requests from 32 clients
                 (each 429 retried after its Retry-After)

and compares every HTTP score with the in-process score of the same content (bit-identical expected: same
fingerprint, and a content's rows do not depend on its neighbours).

    python benchmarks/gpu_served.py --tokenizer DIR [--budget 19200 --block 64] [--pass-sizes 4] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import torch

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--budget", type=int, default=19200, help="rows per pass (server and in-process)")
ARGS.add_argument("--block", type=int, default=64, help="content alignment (server and in-process)")
ARGS.add_argument("--pass-sizes", type=int, default=4, help="launch sizes per pass (server and in-process)")
ARGS.add_argument("--port", type=int, default=8391)
ARGS.add_argument("--small", action="store_true", help="a tiny model and job (checks the script, any device)")
ARGS.add_argument("--device", default="cuda:0")
ARGS.add_argument("--switch-ms", type=float, default=None,
                  help="the server's GIL switch interval in ms (default: spinfc.server.service.SWITCH_SECONDS)")
ARGS.add_argument("--out", type=Path, default=None)


def config(vocab: int, small: bool):
    from benchmarks.harness.models import LLAMA3_8B
    from benchmarks.harness.models import TINY

    import attrs

    return attrs.evolve(TINY if small else LLAMA3_8B, vocab=vocab)


def model_folder(tokenizer: Path, folder: Path) -> Path:
    """The tokenizer's files and a config.json naming the model, so the name resolves as a snapshot folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for file in tokenizer.iterdir():
        shutil.copy(file, folder / file.name)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return folder


def random_model(name: str, small: bool, device: str):
    """The random-weight model (same seed, so the same weights in every process)."""
    from benchmarks.harness.models import random_state_dict
    from spinfc.backend import reference, triton_ops
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.models import build_model

    vocab = len(load_tokenizer(name))
    c = config(vocab, small)
    state = {k: v.to(torch.bfloat16 if device.startswith("cuda") else torch.float32)
             for k, v in random_state_dict(c, device, 0).items()}
    ops = triton_ops if device.startswith("cuda") else reference
    return build_model(c, state, ops=ops, dtype=next(iter(state.values())).dtype, device=device, name=name,
                       weights_hash="random-llama-8b-shape")


def job_bodies(name: str, small: bool) -> dict:
    from benchmarks.harness.jobs import content, request_body
    from spinfc.registry import load_tokenizer

    tokenizer = load_tokenizer(name)
    n, tokens = (3, 40) if small else (24, 470)
    texts = [content(i, tokenizer, tokens) for i in range(n)]
    whole = request_body(texts)
    if small:
        whole["scoring"]["queries"] = whole["scoring"]["queries"][:4]
    queries = whole["scoring"]["queries"]
    one = lambda t: {"inputs": [{"messages": [{"role": "user", "content": t}]}], "scoring": {"queries": queries}}  # noqa: E731
    return {"texts": texts, "whole": whole, "one": one, "questions_per_content": len(queries)}


# ---- the server, in a child process ------------------------------------------------------------------------------


def serve_child(name: str, small: bool, device: str, budget: int, block: int, sizes: int, port: int,
                switch_ms: float | None = None) -> None:
    import uvicorn

    from spinfc.server import service

    if switch_ms is not None:
        service.SWITCH_SECONDS = switch_ms / 1000

    from spinfc.config import EngineSettings, ServerSettings, Settings
    from spinfc.server.app import create_app

    settings = Settings(engine=EngineSettings(model=name, device=device, token_budget=budget, block=block,
                                              pass_sizes=sizes,
                                              warmup="short"), server=ServerSettings(port=port))
    record_timeline(TIMELINE)  # before the app is built: its middleware binds the handler it wraps
    app = create_app(settings, load_model=lambda n, dtype, d: random_model(name, small, d))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


TIMELINE = Path("/tmp/spinfc-served-timeline.txt")


def record_timeline(path: Path) -> None:
    """In the server's process: append `time kind detail` for every request entering the app (`entered`), its body
    decoded (`parsed`), reaching the scoring code (`received`), compiled (the compile's microseconds), queued in
    the engine, every pass launched (rows, segments), and every request scored and answered, for the burst's
    timeline (`timeline`)."""
    import importlib

    from spinfc.runtime.engine import Engine
    from spinfc.runtime.intake import Intake
    from spinfc.runtime.runner import Runner
    from spinfc.server.body import BodyRequest
    from spinfc.server.observe import RequestMetrics

    route = importlib.import_module("spinfc.server.routes.score")  # the module (the package exports the handler)

    out = path.open("a", buffering=1)

    def mark(kind: str, *detail) -> None:
        out.write(" ".join(map(str, (time.time(), kind, *detail))) + "\n")

    compile_program, submit, score_body = Intake.compile_program, Engine.submit, route.score_body
    handle, json_body = RequestMetrics.handle, BodyRequest.json

    def timed_compile(self, *args, **kwargs):
        began = time.perf_counter()
        result = compile_program(self, *args, **kwargs)
        mark("compiled", round((time.perf_counter() - began) * 1e6))  # and how long the compile took, in us
        return result

    def timed_submit(self, compiled):
        future = submit(self, compiled)
        mark("queued")
        return future

    async def timed_score_body(*args, **kwargs):
        mark("received")
        result = await score_body(*args, **kwargs)
        mark("scored")
        return result

    async def timed_handle(self, scope, receive, send, next_app):
        scoring = scope.get("path") == "/v1/score"
        if scoring:
            mark("entered")
        try:
            return await handle(self, scope, receive, send, next_app)
        finally:
            if scoring:
                mark("answered")

    async def timed_json(self):
        data = await json_body(self)
        mark("parsed")
        return data

    Intake.compile_program, Engine.submit, route.score_body = timed_compile, timed_submit, timed_score_body
    RequestMetrics.handle, BodyRequest.json = timed_handle, timed_json
    launch = Runner.launch

    def timed_launch(self, arrays):
        pending = launch(self, arrays)
        mark("pass", pending.rows, len(arrays))
        return pending

    Runner.launch = timed_launch


def timeline(path: Path, began: float, ended: float) -> dict:
    """The server's marks between `began` and `ended` (time.time()), in ms from `began`, by kind."""
    marks: dict = {}
    for line in path.read_text().splitlines():
        t, kind, *detail = line.split()
        if began <= float(t) <= ended:
            mark = round((float(t) - began) * 1000)
            marks.setdefault(kind, []).append([mark, *map(int, detail)] if detail else mark)
    return marks


# ---- the client ------------------------------------------------------------------------------------------------


async def post(client, body: dict, stats: dict) -> dict:
    while True:
        response = await client.post("/v1/score", json=body)
        if response.status_code == 429:
            stats["429"] += 1
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            continue
        if response.status_code >= 500:
            stats["5xx"] += 1
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.text[:600]}")
        return response.json()


def scores_of(answer: dict) -> list:
    """[input][query][option] logprobs of a /v1/score answer to an `inputs` request."""
    return [[[o["logprob"] for o in q["combinations"][0]["options"]] for q in item["results"]]
            for item in answer["inputs"]]


async def passes_run(client) -> int:
    """The server's spinfc_passes_total (what a pattern's passes are counted with)."""
    text = (await client.get("/metrics")).text
    return int(float(next(line.split()[-1] for line in text.splitlines() if line.startswith("spinfc_passes_total"))))


async def pattern(base: str, bodies: list[dict], concurrency: int, questions: int) -> dict:
    import httpx

    stats = {"429": 0, "5xx": 0}
    answers: list = [None] * len(bodies)
    queue = list(range(len(bodies)))
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        async def worker():
            while queue:
                i = queue.pop(0)
                answers[i] = await post(client, bodies[i], stats)
        before = await passes_run(client)
        began, wall = time.perf_counter(), time.time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - began
        marks = timeline(TIMELINE, wall, time.time()) if TIMELINE.exists() and len(bodies) <= 24 else {}
        passes = await passes_run(client) - before
    return {"seconds": round(seconds, 3), "questions_per_s": round(questions / seconds, 1), "passes": passes, **stats,
            "timeline": marks, "answers": answers}


def wait_ready(base: str, child, limit: float = 400) -> float:
    import httpx

    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        if not child.is_alive():
            raise RuntimeError("the server process died")
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                return time.perf_counter() - began
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError("the server did not become ready")


# ---- in-process --------------------------------------------------------------------------------------------------


def burst_timeline(engine, score, bodies: list[dict], questions: int, reps: int = 3) -> dict:
    """The one-content requests all at once in this process (no HTTP): the time, and when (ms from the start) each
    compile ended and each pass was launched with how many rows: where a burst waits, without the server."""
    compiled_at, queued_at, launched = [], [], []
    compile_program, launch, submit = engine.intake.compile_program, engine.runner.launch, engine.submit

    def timed_compile(*args, **kwargs):
        out = compile_program(*args, **kwargs)
        compiled_at.append(time.perf_counter())
        return out

    def timed_launch(arrays):
        pending = launch(arrays)
        launched.append((time.perf_counter(), pending.rows, len(arrays)))
        return pending

    def timed_submit(compiled):
        future = submit(compiled)
        queued_at.append(time.perf_counter())
        return future

    engine.intake.compile_program, engine.runner.launch, engine.submit = timed_compile, timed_launch, timed_submit

    async def all_at_once():
        return await asyncio.gather(*(score(body) for body in bodies))

    best = None
    try:
        for _ in range(reps):
            compiled_at.clear()
            queued_at.clear()
            launched.clear()
            began = time.perf_counter()
            asyncio.run(all_at_once())
            seconds = time.perf_counter() - began
            run = {"seconds": round(seconds, 3), "questions_per_s": round(questions / seconds, 1),
                   "compiled_ms": [round((t - began) * 1000) for t in compiled_at],
                   "queued_ms": [round((t - began) * 1000) for t in queued_at],
                   "passes": [(round((t - began) * 1000), rows, n) for t, rows, n in launched]}
            best = run if best is None or run["seconds"] < best["seconds"] else best
    finally:
        engine.intake.compile_program, engine.runner.launch, engine.submit = compile_program, launch, submit
    return best


def in_process(name: str, small: bool, device: str, budget: int, block: int, sizes: int, job: dict,
               reps: int) -> dict:
    from spinfc.backend import serving
    from spinfc.compiler import compile, lower_program
    from spinfc.frontend import program_from_request
    from spinfc.passes import PassContext
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.engine import Engine
    from spinfc.shapes import Shapes

    shapes = Shapes.for_device(device, budget, block, sizes)
    model = random_model(name, small, device)
    tokenizer = load_tokenizer(name)
    if device.startswith("cuda"):
        model, shapes = serving.graph_model(model, shapes)
    engine = Engine(model, shapes, device=device, tokenizer=tokenizer).start()
    questions = len(job["texts"]) * job["questions_per_content"]

    async def score(body):
        return await engine.score(await engine.compile_async(body))

    try:
        asyncio.run(score(job["whole"]))  # warm (the floor is then cached, as on a server that has run before)
        times = []
        passes, rows = engine.stats.passes, engine.stats.rows_total
        for _ in range(reps):
            began = time.perf_counter()
            scored = asyncio.run(score(job["whole"]))
            times.append(time.perf_counter() - began)
        passes, rows = (engine.stats.passes - passes) // reps, (engine.stats.rows_total - rows) // reps
        burst = burst_timeline(engine, score, [job["one"](t) for t in job["texts"]], questions)
        engine_seconds = min(times)
        per_content = [scored.scores[c] for c in scored.compiled.inputs]
        # the pre-lowered path: the same compiled passes as `spinfc compile --emit launches`, replayed back to back
        program = compile(program_from_request(job["whole"], model=name), PassContext(tokenizer, shapes))
        launches = [launch.to(device) for launch in lower_program(program, shapes)]
        lowered = []
        for _ in range(reps):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            began = time.perf_counter()
            with torch.inference_mode():
                outs = [model.forward(launch) for launch in launches]
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            lowered.append(time.perf_counter() - began)
        # the runner's way in: the same launches packed in one pinned buffer (`launch.packed`), one copy each
        same_packed = True
        for launch, out in zip(launches, outs):
            packed_launch = pinned_packed(launch)
            with torch.inference_mode():
                same_packed &= torch.equal(model.forward(packed_launch), out)
        del outs
        return {"packed_launches_bit_identical": bool(same_packed),
                "engine_seconds": round(engine_seconds, 3),
                "engine_questions_per_s": round(questions / engine_seconds, 1),
                "engine_passes": passes, "engine_rows_launched": rows, "burst": burst,
                "launch_sizes": [size[0] for size in shapes.launch_sizes()] if shapes.fixed else [shapes.budget],
                "prelowered_seconds": round(min(lowered), 3),
                "prelowered_questions_per_s": round(questions / min(lowered), 1),
                "passes": len(launches), "plan_fill": round(program.stat("rows_used") / (len(launches) * budget), 4),
                "scores": per_content}
    finally:
        engine.close()
        del engine, model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def pinned_packed(launch):
    """`launch` (on the device) copied into one pinned host buffer laid out by `launch.packed`, as the runner stages."""
    from spinfc.backend.launch import packed, packed_bytes

    T, R, N = launch.budget, int(launch.rows.shape[0]), int(launch.read_row.shape[0])
    pin = torch.cuda.is_available()
    host = packed(torch.empty(packed_bytes(T, R, N), dtype=torch.uint8, pin_memory=pin), T, R, N, launch.spans)
    for name in ("tokens", "positions", "ends", "rows", "read_row", "read_token"):
        getattr(host, name).copy_(getattr(launch, name))
    return host


def main(argv: list[str] | None = None) -> None:
    o = ARGS.parse_args(argv)
    name = str(model_folder(o.tokenizer, Path("/tmp/spinfc-served-model")))
    job = job_bodies(name, o.small)
    n = len(job["texts"])
    q = job["questions_per_content"]
    results: dict = {"budget": o.budget, "block": o.block, "pass_sizes": o.pass_sizes, "contents": n,
                     "questions": n * q, "switch_ms": o.switch_ms}
    results["in_process"] = inproc = in_process(name, o.small, o.device, o.budget, o.block, o.pass_sizes, job, reps=3)
    print(json.dumps({k: v for k, v in inproc.items() if k != "scores"}), flush=True)

    child = mp.get_context("spawn").Process(target=serve_child,
                                            args=(name, o.small, o.device, o.budget, o.block, o.pass_sizes, o.port,
                                                  o.switch_ms), daemon=True)
    child.start()
    base = f"http://127.0.0.1:{o.port}"
    try:
        results["ready_seconds"] = round(wait_ready(base, child), 1)
        one = job["one"]
        step = max(1, n // 4)
        six = [{"inputs": job["whole"]["inputs"][i:i + step], "scoring": job["whole"]["scoring"]}
               for i in range(0, n, step)]
        patterns = {
            "one request, all contents": lambda: pattern(base, [job["whole"]], 1, n * q),
            "4 concurrent requests": lambda: pattern(base, six, 4, n * q),
            "one-content requests, all at once": lambda: pattern(base, [one(t) for t in job["texts"]], n, n * q),
            "stream: 10x contents from 32 clients": lambda: pattern(
                base, [one(job["texts"][i % n]) for i in range(10 * n)], 32, 10 * n * q),
        }
        asyncio.run(pattern(base, [job["whole"]], 1, n * q))  # warm the server (and its floor cache)
        want = inproc["scores"]
        served = results["served"] = {}
        identical = True
        for label, make in patterns.items():
            runs = [asyncio.run(make()) for _ in range(2)]
            best = min(runs, key=lambda r: r["seconds"])
            got = []
            for answer in best.pop("answers"):
                got += scores_of(answer)
            expect = want if len(got) == n else [want[i % n] for i in range(len(got))]
            same = got == [[list(opts) for opts in content] for content in expect]
            identical &= same
            best["bit_identical_to_in_process"] = same
            best["of_in_process_engine"] = round(best["questions_per_s"] / inproc["engine_questions_per_s"], 3)
            best["of_prelowered"] = round(best["questions_per_s"] / inproc["prelowered_questions_per_s"], 3)
            best["429_all_runs"] = sum(r["429"] for r in runs)
            for r in runs:
                r.pop("answers", None)
            served[label] = best
            print(label, json.dumps(best), flush=True)
        results["all_bit_identical"] = identical
    finally:
        child.terminate()
        child.join(30)
    inproc.pop("scores")
    print(f"\nlaunch sizes {inproc['launch_sizes']}")
    print(f"in-process burst of one-content requests: {json.dumps(inproc['burst'])}")
    print("| path | seconds | questions/s | of in-process engine | of pre-lowered | passes | 429s | bit-identical |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    print(f"| in-process engine | {inproc['engine_seconds']} | {inproc['engine_questions_per_s']:,} | 1.000 | "
          f"{inproc['engine_questions_per_s'] / inproc['prelowered_questions_per_s']:.3f} | "
          f"{inproc['engine_passes']} ({inproc['engine_rows_launched']:,} rows) | | |")
    print(f"| pre-lowered launches ({inproc['passes']} passes, fill {inproc['plan_fill']}) | "
          f"{inproc['prelowered_seconds']} | {inproc['prelowered_questions_per_s']:,} | | 1.000 | | | |")
    for label, r in results.get("served", {}).items():
        print(f"| HTTP: {label} | {r['seconds']} | {r['questions_per_s']:,} | {r['of_in_process_engine']} | "
              f"{r['of_prelowered']} | {r['passes']} | {r['429_all_runs']} | {r['bit_identical_to_in_process']} |")
    if o.out:
        o.out.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
