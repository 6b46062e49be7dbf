"""The host steps of one /v1/score request, each timed on its own (no server, no GPU): what the event loop (and the
compile thread) does with a body before the compile, and with a request's scores after its last pass.

    before   read: the depth check on the raw bytes, the strict decode into `ScoreRequest`, the body handed to the
             frontend, the prechecks; on the compile thread: the frontend's program (`program_from_request`)
    after    `Scored.results` (option logprobs -> p, floor_p, residual), the packs' split, the response value, its
             JSON bytes (as Litestar encodes a route's return value)

The bodies are the seed-shaped job (benchmarks/job.py: 24 contents x 56 questions in one request; one request of 6
contents) as the client sends them (httpx's `json=`); the scores are random logprobs on a request compiled by the
real engine (the TINY model with the real tokenizer; a stand-in GPU returns at once).

    python benchmarks/http_steps.py --tokenizer DIR [--repeats 200] [--out steps.json]

Prints the median microseconds of each step (and its spread) for each body.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import gpu_served  # noqa: E402
import served_host  # noqa: E402

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--repeats", type=int, default=200, help="times each step runs; the median is reported")
ARGS.add_argument("--out", type=Path, default=None)


def timed(fn, repeats: int) -> dict:
    """Median and quartiles of `fn()` in microseconds, after one warm call."""
    fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1e6)
    q = statistics.quantiles(times, n=4)
    return {"median_us": round(statistics.median(times), 1), "q1_us": round(q[0], 1), "q3_us": round(q[2], 1)}


def before_steps(raw: bytes, repeats: int, model: str) -> dict:
    """The body's way from bytes to the frontend's program, step by step, as the server runs it."""
    import msgspec
    from spinfc.server.prechecks import Prechecks

    from spinfc.config import Limits
    from spinfc.frontend import program_from_request
    from spinfc.frontend.json_body import check_depth, decode_body
    from spinfc.server.routes.score import frontend_body
    from spinfc.wire.schemas import ScoreRequest

    data = decode_body(raw, ScoreRequest)
    body = frontend_body(data)
    checks = Prechecks(Limits(), 48)
    steps = {
        "depth check": lambda: check_depth(raw),
        "strict decode into ScoreRequest": lambda: msgspec.json.decode(raw, type=ScoreRequest, strict=True),
        "decode_body (the two above)": lambda: decode_body(raw, ScoreRequest),
        "frontend body (route)": lambda: frontend_body(data),
        "prechecks": lambda: checks.score_body(body),
        "program_from_request (compile thread)": lambda: program_from_request(body, model=model),
    }
    return {name: timed(fn, repeats) for name, fn in steps.items()}


def scored_request(name: str, body: dict):
    """A real `Scored` for `body` (compiled by the engine, run by a stand-in GPU), with random logprobs."""
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.admit.compiled import Scored
    from spinfc.runtime.engine import Engine

    served_host.stand_in_gpu(0.0, forward=False)
    engine = Engine(gpu_served.random_model(name, True, "cpu"), served_host.gpu_shapes(19200, 64, 4), device="cpu",
                    tokenizer=load_tokenizer(name)).start()

    async def score():
        return await engine.score(await engine.compile_async(body))

    try:
        scored = asyncio.run(score())
    finally:
        engine.close()
    rng = random.Random(0)
    scores = {c: tuple(tuple(-rng.expovariate(0.5) for _ in row) for row in rows) for c, rows in scored.scores.items()}
    return Scored(scored.compiled, scores, scored.processed_tokens, scored.floor_cached, scored.placements)


def after_steps(scored, repeats: int) -> dict:
    """A request's scores to its response bytes, step by step, as the route runs it."""
    from litestar.serialization import default_serializer, encode_json

    from spinfc.runtime.admit.request_packs import WithPacks, split_results
    from spinfc.server.routes.score import score_response
    from spinfc.server.scoring import ScoringOutcome

    program = scored.compiled.program
    plan = WithPacks(program, tuple(q.id for q in program.queries), (), False, {})
    per_input = scored.results()
    split = [split_results(results, plan) for results in per_input]
    outcome = ScoringOutcome(own=[own for own, _ in split], packs=[p for _, p in split], scored=scored,
                             questions=len(program.questions) * len(scored.compiled.inputs), debug=None)
    response = score_response(outcome, many=True, packs=False, model="m", fingerprint="f")
    steps = {
        "results (Scored.results)": scored.results,
        "split by pack": lambda: [split_results(results, plan) for results in per_input],
        "response value (route)": lambda: score_response(outcome, many=True, packs=False, model="m",
                                                         fingerprint="f"),
        "encode (Litestar's encode_json)": lambda: encode_json(response, default_serializer),
    }
    out = {name: timed(fn, repeats) for name, fn in steps.items()}
    out["response bytes"] = len(encode_json(response, default_serializer))
    return out


def main() -> None:
    o = ARGS.parse_args()
    name = str(gpu_served.model_folder(o.tokenizer, Path("/tmp/spinfc-served-host-model")))
    job = gpu_served.job_bodies(name, small=False)
    queries = job["whole"]["scoring"]["queries"]
    bodies = {"24 contents x 56": job["whole"],
              "6 contents x 56": {"inputs": job["whole"]["inputs"][:6], "scoring": {"queries": queries}}}
    results = {}
    for label, body in bodies.items():
        raw = json.dumps(body).encode()  # as httpx sends `json=`
        results[label] = {"body bytes": len(raw), "before": before_steps(raw, o.repeats, name),
                          "after": after_steps(scored_request(name, body), o.repeats)}
    for label, parts in results.items():
        print(f"\n{label} ({parts['body bytes']:,} body bytes, {parts['after']['response bytes']:,} response bytes)")
        for side in ("before", "after"):
            for step, t in parts[side].items():
                if isinstance(t, dict):
                    print(f"  {side:6s} {step:40s} {t['median_us']:9.1f} us  [{t['q1_us']:.1f} - {t['q3_us']:.1f}]")
    if o.out:
        o.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
