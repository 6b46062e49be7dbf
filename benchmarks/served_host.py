"""The host side of the served burst, without a GPU: 24 one-content requests of the seed-shaped job (~470 tokens
each, 56 questions) sent at once to the real app (`spinfc.server.app.create_app` under uvicorn, in a child
process) and to the engine in this process, with the per-request timeline of each: where the milliseconds before
the first pass go.

The model is gpu_run.TINY with the real tokenizer's vocabulary (random weights, the PyTorch reference ops), and the
GPU is stood in for: the engine gets CUDA's pass shapes (the launch sizes of `--pass-sizes`, fixed answer rows and
reads) and a runner whose launch returns at once while a "device" thread waits out the time an H200 takes for the
launched rows at the 8B shape (`--row-us`; measured 22 us per row: 2 passes, 33.7k rows, ~750 ms). The stand-in
returns zeros as logprobs unless `--forward` (then it runs the TINY model's pass first, which on this CPU takes
longer than the H200 does and competes with the host work for the cores): these runs time the host, they do not
score. So the scheduling is the GPU's (which sizes launch, when, how many passes) and the host work is this
machine's, which is 2-3x slower than the H200's host and shared: read the timelines for their order and spacing.

    python benchmarks/served_host.py --tokenizer DIR [--contents 24] [--per-request 1] [--runs 2] [--row-us 22]

`--per-request K` sends the contents as requests of K contents each (24: gpu_served's one request of every content;
6: its 4 concurrent requests); `--http-only` skips the in-process reference.

Prints the in-process time of one request carrying every content (gpu_served.py's reference), and for each path
the time of the burst and its timeline in ms from its first request: `entered` (the request reached the app),
`parsed` (its body decoded), `received` (the scoring code), `compiled` ([ms, the compile's us]), `queued` (in the
engine's queue), `pass` ([ms, rows launched, segments]), `scored`, `answered`; and the client's `got` (the response
read) and `decoded` (its JSON parsed, as gpu_served.py's client does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import gpu_served  # noqa: E402

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--contents", type=int, default=24, help="contents sent at once")
ARGS.add_argument("--per-request", type=int, default=1, help="contents per request")
ARGS.add_argument("--http-only", action="store_true", help="without the in-process reference")
ARGS.add_argument("--budget", type=int, default=19200)
ARGS.add_argument("--block", type=int, default=64)
ARGS.add_argument("--pass-sizes", type=int, default=4)
ARGS.add_argument("--row-us", type=float, default=22.0, help="stand-in GPU time per launched row, microseconds")
ARGS.add_argument("--forward", action="store_true", help="run the TINY model's pass too (else zeros)")
ARGS.add_argument("--host-cores", type=int, default=16,
                  help="the cores the server's thread pools are sized for (asyncio's default executor: cores + 4 "
                       "threads, at most 32): the H200's host has 16")
ARGS.add_argument("--stream", action="store_true", help="also 10x the contents from 32 clients (gpu_served's stream)")
ARGS.add_argument("--runs", type=int, default=2, help="each burst this many times after a warm one; the best kept")
ARGS.add_argument("--port", type=int, default=8393)
ARGS.add_argument("--out", type=Path, default=None)

TIMELINE = Path("/tmp/spinfc-served-host-timeline.txt")


class _Done:
    """What `Runner.collect` waits on: the stand-in device's work for one pass."""

    def __init__(self, future) -> None:
        self.future = future

    def synchronize(self) -> None:
        self.future.result()

    def query(self) -> bool:
        return self.future.done()


def stand_in_gpu(row_us: float, forward: bool) -> None:
    """Make every Runner launch as on CUDA: `launch` stages the pass and returns; a device thread runs the forward
    (the reference ops) and waits until `rows * row_us` has passed since the launch; `collect` waits for it."""
    from spinfc.runtime.launch.runner import Runner

    device = ThreadPoolExecutor(1, thread_name_prefix="stand-in-gpu")
    init = Runner.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.asynchronous = True

    def launch(self, arrays):
        launch_, pending = self.stage(arrays)
        began = time.perf_counter()

        def run():
            import torch

            if forward:
                with torch.inference_mode():
                    pending.output.copy_(self.model.forward(launch_).float())
            else:
                pending.output.zero_()
            time.sleep(max(0.0, began + pending.rows * row_us * 1e-6 - time.perf_counter()))

        pending.event = _Done(device.submit(run))
        return pending

    Runner.__init__, Runner.launch = __init__, launch


def gpu_shapes(budget: int, block: int, sizes: int):
    from spinfc.shapes import Shapes

    return Shapes.for_device("cuda:0", budget, block, sizes)


# ---- the server, in a child process ------------------------------------------------------------------------------


def serve_child(name: str, budget: int, block: int, sizes: int, row_us: float, forward: bool, cores: int,
                port: int) -> None:
    import os

    import torch  # noqa: F401 (its thread pools sized first, by the real core count)
    import uvicorn

    os.cpu_count = lambda: cores  # the thread pools Python sizes by the core count (to_thread's) as on that host

    from spinfc.config import EngineSettings, ServerSettings, Settings
    from spinfc.server import service as service_module
    from spinfc.server.app import create_app

    class Shapes(service_module.Shapes):  # CUDA's launch sizes on this CPU
        @classmethod
        def for_device(cls, device, budget, block=128, sizes=4):
            return gpu_shapes(budget, block, sizes)

    service_module.Shapes = Shapes
    stand_in_gpu(row_us, forward)
    sys.setswitchinterval(service_module.SWITCH_SECONDS)  # as the server sets it on CUDA
    settings = Settings(engine=EngineSettings(model=name, device="cpu", token_budget=budget, block=block,
                                              pass_sizes=sizes, warmup="short"), server=ServerSettings(port=port))
    gpu_served.record_timeline(TIMELINE)  # before the app is built: its middleware binds the handler it wraps
    app = create_app(settings, load_model=lambda n, dtype, d: gpu_served.random_model(name, True, "cpu"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def http_burst(base: str, bodies: list[dict]) -> tuple[float, dict]:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=600, limits=httpx.Limits(max_connections=100)) as client:
        wall = time.time()
        began = time.perf_counter()
        client_marks: dict = {"got": [], "decoded": []}

        async def post(body):
            answer = await client.post("/v1/score", json=body)
            client_marks["got"].append(round((time.perf_counter() - began) * 1000))
            if answer.status_code != 200:
                raise RuntimeError(f"status {answer.status_code}: {answer.text[:400]}")
            answer.json()
            client_marks["decoded"].append(round((time.perf_counter() - began) * 1000))

        await asyncio.gather(*(post(body) for body in bodies))
        seconds = time.perf_counter() - began
    time.sleep(0.2)  # the server's last marks
    return seconds, {**gpu_served.timeline(TIMELINE, wall, wall + seconds + 0.1), **client_marks}


async def http_stream(base: str, bodies: list[dict], clients: int) -> float:
    """`bodies` sent by `clients` clients, each sending its next as soon as its last is answered: the seconds."""
    import httpx

    queue = list(bodies)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=httpx.Limits(max_connections=100)) as client:
        async def worker():
            while queue:
                answer = await client.post("/v1/score", json=queue.pop(0))
                if answer.status_code != 200:
                    raise RuntimeError(f"{answer.status_code}: {answer.text[:400]}")
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return time.perf_counter() - began


# ---- in-process --------------------------------------------------------------------------------------------------


def in_process(name: str, o, bodies: list[dict]) -> dict:
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.engine import Engine

    model = gpu_served.random_model(name, True, "cpu")
    stand_in_gpu(o.row_us, o.forward)
    engine = Engine(model, gpu_shapes(o.budget, o.block, o.pass_sizes), device="cpu", tokenizer=load_tokenizer(name))
    engine.start()

    async def score(body):
        return await engine.score(await engine.compile_async(body))

    try:
        asyncio.run(score(bodies[0]))
        questions = sum(len(body["inputs"]) for body in bodies) * len(bodies[0]["scoring"]["queries"])
        whole = {"inputs": [item for body in bodies for item in body["inputs"]], "scoring": bodies[0]["scoring"]}
        times = []
        for _ in range(o.runs):  # the reference of gpu_served.py: one request carrying every content
            began = time.perf_counter()
            asyncio.run(score(whole))
            times.append(time.perf_counter() - began)
        burst = gpu_served.burst_timeline(engine, score, bodies, questions, reps=o.runs)
        return {"one_request_seconds": round(min(times), 3), **burst}
    finally:
        engine.close()


def spacing(marks: list) -> float | None:
    """The median gap between consecutive marks (ms)."""
    gaps = [b - a for a, b in zip(marks, marks[1:])]
    return statistics.median(gaps) if gaps else None


def main() -> None:
    o = ARGS.parse_args()
    name = str(gpu_served.model_folder(o.tokenizer, Path("/tmp/spinfc-served-host-model")))
    job = gpu_served.job_bodies(name, small=False)
    texts, k = job["texts"][:o.contents], o.per_request
    bodies = [{"inputs": [item for t in texts[i:i + k] for item in job["one"](t)["inputs"]],
               "scoring": job["one"](texts[0])["scoring"]} for i in range(0, len(texts), k)]
    results = {"row_us": o.row_us, "contents": len(texts), "per_request": k}
    if not o.http_only:
        results["in_process"] = in_process(name, o, bodies)
        print("in-process burst:", json.dumps(results["in_process"]), flush=True)

    TIMELINE.unlink(missing_ok=True)
    child = mp.get_context("spawn").Process(
        target=serve_child, args=(name, o.budget, o.block, o.pass_sizes, o.row_us, o.forward, o.host_cores, o.port),
        daemon=True)
    child.start()
    base = f"http://127.0.0.1:{o.port}"
    try:
        gpu_served.wait_ready(base, child)
        asyncio.run(http_burst(base, bodies))  # warm (the floor cached, as on a server that has run before)
        runs = [asyncio.run(http_burst(base, bodies)) for _ in range(o.runs)]
        if o.stream:
            stream = [bodies[i % len(bodies)] for i in range(10 * len(bodies))]
            results["stream_seconds"] = min(asyncio.run(http_stream(base, stream, 32)) for _ in range(o.runs))
    finally:
        child.terminate()
        child.join(30)
    seconds, marks = min(runs, key=lambda run: run[0])
    results["http"] = {"seconds": round(seconds, 3), "all_seconds": [round(s, 3) for s, _ in runs], "timeline": marks,
                       "all_timelines": [m for _, m in runs],
                       "entered_spacing_ms": spacing(marks.get("entered", [])),
                       "queued_spacing_ms": spacing(marks.get("queued", []))}
    print("HTTP burst:", json.dumps(results["http"]), flush=True)
    if o.out:
        o.out.write_text(json.dumps(results, indent=1))
    if o.http_only:
        return
    inproc = results["in_process"]
    one = inproc["one_request_seconds"]
    print(f"\nin-process, one request of every content: {one} s")
    print(f"in-process burst {inproc['seconds']} s ({one / inproc['seconds']:.3f} of one request), passes "
          f"{inproc['passes']}")
    print(f"HTTP burst       {seconds:.3f} s ({one / seconds:.3f} of one request in-process), passes "
          f"{marks.get('pass')}, entered every {results['http']['entered_spacing_ms']} ms, queued every "
          f"{results['http']['queued_spacing_ms']} ms")
    if o.stream:
        print(f"HTTP stream      {results['stream_seconds']:.3f} s for 10x the contents from 32 clients "
              f"({10 * one / results['stream_seconds']:.3f} of one request in-process, 10 times)")


if __name__ == "__main__":
    main()
