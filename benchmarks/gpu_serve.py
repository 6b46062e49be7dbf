"""The server's CUDA start-up, end to end, on a small random-weight model: `Service` loads it (Triton ops, bf16),
captures the pass's CUDA graph, warms up, and scores real requests through the engine; the scores are compared
with the CPU server's (float32 reference) on the same weights, and with the same contents in another request.

    python benchmarks/gpu_serve.py --tokenizer DIR     # DIR: a tokenizer folder (tokenizer.json, ...)

The model is a transformers LlamaForCausalLM of small size with the tokenizer's vocabulary, random weights, saved
as a snapshot folder (config.json, model.safetensors, the tokenizer files) under a temporary directory.
Needs spinfc's server dependencies (litestar, msgspec, lark; on the GPU machine they travel as wheels).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import torch

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


def snapshot(tokenizer: Path, folder: Path) -> Path:
    """A small Llama with random weights and `tokenizer`'s vocabulary, saved as a snapshot folder."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    vocab = len(AutoTokenizer.from_pretrained(str(tokenizer)))
    config = LlamaConfig(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=64, vocab_size=vocab, tie_word_embeddings=True,
                         max_position_embeddings=8192, rope_theta=10000.0, initializer_range=0.05)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(str(folder), safe_serialization=True)
    for file in tokenizer.iterdir():
        shutil.copy(file, folder / file.name)
    return folder


def by_content(scored) -> list:
    """[input][query][option] logprobs of a Scored request, in request order."""
    return [scored.scores[c] for c in scored.compiled.inputs]


async def serve(model: str, device: str, body: dict, reordered: dict) -> dict:
    from spinfc.config import EngineSettings, Settings
    from spinfc.server.service import Service

    service = Service(Settings(engine=EngineSettings(model=model, device=device)))
    began = time.perf_counter()
    await service._start()
    start_seconds = time.perf_counter() - began
    if service.status != "ready":
        raise RuntimeError(f"the service did not become ready: {service.status}: {service.error}")
    engine = service.engine
    try:
        scored = await engine.score(await engine.compile_async(body))
        began = time.perf_counter()
        again = await engine.score(await engine.compile_async(reordered))
        request_seconds = time.perf_counter() - began
        return {"scores": by_content(scored), "reordered": by_content(again), "fingerprint": service.fingerprint,
                "shapes": str(engine.shapes), "start_seconds": round(start_seconds, 1),
                "request_seconds": round(request_seconds, 3), "passes": engine.stats.passes,
                "model": type(engine.model.model).__name__}
    finally:
        service.generator.close()
        await asyncio.to_thread(engine.close)


def flat(scores) -> list[float]:
    return [value for content in scores for query in content for value in query]


def main(argv: list[str] | None = None) -> None:
    options = ARGS.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model = str(snapshot(options.tokenizer, Path(tmp)))
        # The same three contents, in another order and behind a fourth: each lands at another offset of the pass.
        reordered = json.loads(json.dumps(BODY))
        reordered["inputs"] = [{"messages": [{"role": "user", "content": "Where is my order? It is a week late."}]}] \
            + BODY["inputs"][::-1]
        got = asyncio.run(serve(model, options.device, BODY, reordered))
        want = asyncio.run(serve(model, "cpu", BODY, reordered))
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
