"""The server's CUDA start-up, end to end, on a small random-weight model: `start_engine` (what `spinfc serve` runs)
loads it (Triton ops, the default precision), captures every launch size's CUDA graph, and scores real requests
through the engine; the scores are compared with the CPU engine's (float32 reference) on the same weights, and with
the same contents in another request.

    python -m benchmarks.gpu_serve --tokenizer DIR     # DIR: a tokenizer folder (tokenizer.json, ...)
    python -m benchmarks.gpu_serve --tokenizer DIR --device cpu     # checks the script

The model is a four-layer Llama of tiny widths with the tokenizer's vocabulary, random weights, written as a
snapshot folder by harness/models.py under a temporary directory. (The acceptance run serves every family this way
over HTTP; this is the quick check of one.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import models

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder to serve the model with")
ARGS.add_argument("--device", default="cuda:0", help="cuda:0 (the path under test) or cpu (checks the script)")

BODY = {
    "inputs": [{"messages": [{"role": "user", "content": text}]} for text in (
        "The parcel arrived broken and nobody answers the phone.",
        "Thanks, the replacement came the next day and works perfectly.",
        "I was charged twice for one order; please refund the second payment.",
    )],
    "scoring": {"queries": [
        {"id": "unhappy", "template": "\n\nIs the customer unhappy?\nAnswer:<?>", "options": [" yes", " no"]},
        {"id": "topic", "template": "\n\nTopic:<?>", "options": [" delivery", " billing", " praise", " other"]},
    ]},
}


def by_content(scored) -> list:
    """[input][query][option] logprobs of a Scored request, in request order."""
    return [scored.scores[c] for c in scored.compiled.inputs]


def serve(model: str, device: str, body: dict, reordered: dict) -> dict:
    from spinfc.config import EngineSettings
    from spinfc.runtime.start import start_engine

    began = time.perf_counter()
    running = start_engine(EngineSettings(model=model, device=device))
    start_seconds = time.perf_counter() - began
    engine = running.engine

    async def score(request: dict):
        return await engine.score(await engine.compile_async(request))

    try:
        scored = asyncio.run(score(body))
        began = time.perf_counter()
        again = asyncio.run(score(reordered))
        request_seconds = time.perf_counter() - began
        return {"scores": by_content(scored), "reordered": by_content(again), "fingerprint": running.fingerprint,
                "shapes": str(running.shapes), "start_seconds": round(start_seconds, 1),
                "request_seconds": round(request_seconds, 3), "passes": engine.stats.passes,
                "model": type(running.model).__name__}
    finally:
        running.stop()


def flat(scores) -> list[float]:
    return [value for content in scores for query in content for value in query]


def main(argv: list[str] | None = None) -> None:
    options = ARGS.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model = tmp
        models.snapshot("llama-3-8b", Path(tmp), options.tokenizer, layers=4, tiny=True, device=options.device)
        # The same three contents, in another order and behind a fourth: each lands at another offset of the pass.
        reordered = json.loads(json.dumps(BODY))
        reordered["inputs"] = [{"messages": [{"role": "user", "content": "Where is my order? It is a week late."}]}] \
            + BODY["inputs"][::-1]
        got = serve(model, options.device, BODY, reordered)
        want = serve(model, "cpu", BODY, reordered)
    same_elsewhere = flat(got["scores"]) == flat(got["reordered"][1:][::-1])
    gap = max(abs(a - b) for a, b in zip(flat(got["scores"]), flat(want["scores"])))
    report = {
        "device": options.device, "fingerprint": got["fingerprint"], "engine_model": got["model"],
        "pass_shapes": got["shapes"], "start_seconds": got["start_seconds"],
        "second_request_seconds": got["request_seconds"], "passes": got["passes"],
        "scores_equal_in_another_request_order": same_elsewhere,
        "max_gap_to_cpu_float32": gap, "cpu_fingerprint": want["fingerprint"],
        "logprobs_input0": got["scores"][0],
    }
    print(json.dumps(report, indent=1, default=str))
    ok = same_elsewhere and gap < 5e-2 and "triton" in got["fingerprint"] if options.device.startswith("cuda") else \
        same_elsewhere
    print(f"serving check {'OK' if ok else 'FAILED'}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
