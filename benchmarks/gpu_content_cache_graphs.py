"""The content cache on by default on CUDA (issue 36, item 4), on one GPU: the Llama-3-8B shape (random weights,
few layers), the seed-shaped job (24 contents x 56 yes/no questions, benchmarks/harness/jobs.py) served by the app
`spinfc serve` runs at default settings (its ASGI app in this process through Litestar's TestClient: the server's
request path without a socket), and the same app with `--content-cache-tokens 0` as the reference.

    python -m benchmarks.gpu_content_cache_graphs              # < 3 min on an H200 (8 layers)
    python -m benchmarks.gpu_content_cache_graphs --layers 32  # the whole 8B
    python -m benchmarks.gpu_content_cache_graphs --smoke      # the CPU: a tiny model, the same checks

It shows, and exits 1 where one does not hold:
    on by default      the default budget is not 0 and (CUDA) the filling passes replay recording graphs
    first read         the job's scores when its contents are read anew (the passes fill the cache) are the
                       reference server's, bit for bit
    again              the same job again (every content from the cache): the same scores, bit for bit
    alone vs packed    one content alone in a request (from the cache) and a content read anew beside cached ones:
                       each scores as in the whole job, bit for bit
    speed              questions/s of the first read, of the job again, and of the reference (cache off), in process
                       over the app (best of --reps; the reference's passes replay the plain graphs)
On the CPU (--smoke) the checks allow the CPU's rounding (1e-5): its questions' matmuls run over fewer rows there.
Writes --out (JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from benchmarks.harness import models

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--layers", type=int, default=8, help="layers of the Llama-3-8B shape (32: the whole model)")
ARGS.add_argument("--reps", type=int, default=3)
ARGS.add_argument("--smoke", action="store_true", help="a tiny model on the CPU (checks the script and the path)")
ARGS.add_argument("--out", type=Path, default=Path("/tmp/gpu_content_cache_graphs.json"))

TOKENIZER = "smollm2-135m"  # the client's tokenizer (49,152 tokens)


def folder() -> str:
    """A folder with the tokenizer and a config naming a llama (no weights: the app's loader makes them)."""
    return str(models.config_folder(Path("/tmp/spinfc-cache-graphs-model"),
                                    {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, TOKENIZER))


def loader(o):
    """The app's `load_model`: the random 8B-shape stack in the precision the settings give (the CUDA default,
    fp16 around a float32 residual stream), the same weights in every app (one seed)."""
    import attrs
    from benchmarks.harness.stacks import LLAMA3_8B, TINY, random_state_dict

    from spinfc.backend import reference, triton_ops
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.models import build_model

    def load(name, precision, device):
        c = attrs.evolve(TINY if o.smoke else attrs.evolve(LLAMA3_8B, layers=o.layers),
                         vocab=len(load_tokenizer(name)))
        ops = triton_ops if device.startswith("cuda") else reference
        return build_model(c, random_state_dict(c, device, 0), ops=ops, precision=precision, device=device,
                           name=name, weights_hash=f"random-llama-8b-shape-{c.layers}")
    return load


def scores_of(response) -> list:
    """Per input, per query, per option: (logprob, p) as served."""
    assert response.status_code == 200, response.text[:500]
    return [[[(o["logprob"], o["p"]) for c in r["combinations"] for o in c["options"]] for r in i["results"]]
            for i in response.json()["inputs"]]


def difference(a, b) -> float:
    """The largest |difference| between two score lists of the same shape (inf where the shapes differ)."""
    flat = lambda x: [v for i in x for q in i for pair in q for v in pair]  # noqa: E731
    fa, fb = flat(a), flat(b)
    return max((abs(x - y) for x, y in zip(fa, fb)), default=0.0) if len(fa) == len(fb) else float("inf")


def serve(o, name: str, device: str, cache_tokens: int | None, texts: list[str], job: dict) -> dict:
    """One app (default settings but the cache budget): the job read anew, then again, then the packing checks."""
    from litestar.testing import TestClient

    from spinfc.config import EngineSettings, Settings
    from spinfc.server.app import create_app

    settings = Settings(engine=EngineSettings(model=name, device=device, content_cache_tokens=cache_tokens))
    questions = len(texts) * len(job["scoring"]["queries"])
    with TestClient(create_app(settings, load_model=loader(o)), timeout=900) as client:
        began = time.perf_counter()
        while client.get("/readyz").status_code != 200:
            if time.perf_counter() - began > 900:
                raise SystemExit(f"not ready after 900 s: {client.get('/readyz').text[:300]}")
            time.sleep(0.5)
        engine = client.app.state.service.engine
        cache = engine.contents.cache
        out = {"budget_tokens": cache.budget, "records": bool(getattr(engine.model, "records", False)),
               "ready_s": round(time.perf_counter() - began, 1)}
        client.post("/v1/score", json=job)  # the first request also runs the floor (cached whole, per question set)
        first, again = [], []
        for rep in range(o.reps):  # each rep: the contents read anew (cache emptied), then again from the cache
            cache.clear()
            t = time.perf_counter()
            out["first_scores"] = scores_of(client.post("/v1/score", json=job))
            first.append(time.perf_counter() - t)
            t = time.perf_counter()
            out["again_scores"] = scores_of(client.post("/v1/score", json=job))
            again.append(time.perf_counter() - t)
        out["hits"] = cache.stats.hits
        out["first_qps"] = round(questions / min(first), 1)
        out["again_qps"] = round(questions / min(again), 1)
        k = picked(texts)
        one = {**job, "inputs": job["inputs"][k:k + 1]}  # one content alone (from the cache where there is one)
        out["alone_scores"] = scores_of(client.post("/v1/score", json=one))
        cache.clear()  # content k read anew beside the others from the cache (kept again first)
        client.post("/v1/score", json={**job, "inputs": job["inputs"][:k] + job["inputs"][k + 1:]})
        out["packed_scores"] = scores_of(client.post("/v1/score", json=job))
    return out


def picked(texts: list[str]) -> int:
    """The content the packing checks single out."""
    return min(5, len(texts) - 1)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness.jobs import content, request_body

    from spinfc.registry import load_tokenizer

    o = ARGS.parse_args(argv)
    device = "cpu" if o.smoke else "cuda:0"
    exact = not o.smoke
    name = folder()
    tokenizer = load_tokenizer(name)
    texts = [content(i, tokenizer, 40 if o.smoke else 470) for i in range(3 if o.smoke else 24)]
    job = request_body(texts)
    if o.smoke:
        job["scoring"]["queries"] = job["scoring"]["queries"][:4]
        o.reps = 1
    began = time.perf_counter()
    print("the app at defaults (the cache on) ...", flush=True)
    on = serve(o, name, device, None, texts, job)
    print("the app with --content-cache-tokens 0 ...", flush=True)
    off = serve(o, name, device, 0, texts, job)
    allowed = 0.0 if exact else 1e-5
    checks = {
        "on_by_default": on["budget_tokens"] > 0 and (on["records"] or o.smoke),
        "first_read_equals_cache_off": difference(on["first_scores"], off["first_scores"]) <= allowed,
        "again_from_cache_equals_first_read": difference(on["again_scores"], on["first_scores"]) <= allowed,
        "again_read_every_content_from_cache": on["hits"] >= len(texts) * o.reps,
        "alone_from_cache_equals_packed": difference(on["alone_scores"], [on["first_scores"][picked(texts)]])
        <= allowed,
        "read_anew_beside_cached_equals_first": difference(on["packed_scores"], on["first_scores"]) <= allowed,
    }
    questions = len(texts) * len(job["scoring"]["queries"])
    result = {"device": torch.cuda.get_device_name(0) if device != "cpu" else "cpu", "layers": o.layers,
              "questions": questions, "budget_tokens": on["budget_tokens"], "records": on["records"],
              "ready_s": {"on": on["ready_s"], "off": off["ready_s"]},
              "qps": {"first_read": on["first_qps"], "again_from_cache": on["again_qps"],
                      "cache_off": off["first_qps"], "cache_off_again": off["again_qps"]},
              "again_over_first": round(on["again_qps"] / on["first_qps"], 3),
              "first_over_cache_off": round(on["first_qps"] / off["first_qps"], 3),
              "checks": checks, "seconds": round(time.perf_counter() - began, 1)}
    o.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    ok = all(checks.values())
    print(f"\n{'all checks passed' if ok else 'A CHECK FAILED'} ({result['seconds']} s); {o.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
