"""Long content on one GPU (issue 36, item 2): contents of 8k, 32k and 64k tokens with 50 yes/no questions each,
served by the app `spinfc serve` runs (its ASGI app in this process, Litestar's TestClient: the server's request
path without a socket) at default settings but for the raised limits the seed asks for (`--max-content-tokens`
65,536 and a `--token-budget` that holds the content with its questions), on Gemma 4 (31B widths: sliding-window
layers with one full layer) and Qwen3.5 (27B widths: three Gated DeltaNet layers to one gated attention layer),
few layers, random weights. Per content: seconds, questions/s, rows of the pass it ran in and what else was in it
(the plan under --debug: a long content runs alone in its pass), peak GPU memory, and the floor (2 x non-embedding
parameters x processed tokens at the measured fp16 matmul rate; attention's own work grows with the square of the
length and is not in that floor, so its share is reported beside it).

    python -m benchmarks.gpu_long_content --tokenizer DIR                     # both families, 8k / 32k / 64k (< 3 min on an H200)
    python -m benchmarks.gpu_long_content --families gemma4 --lengths 8000 32000
    python -m benchmarks.gpu_long_content --smoke             # the CPU: tiny models, 3k / 5k-token contents over
                                                              # the CPU's 2,048-row budget (a lone pass each)

Exits 1 when a content is refused, a score is not finite, or a long content shared its pass with another content.
Writes --out (JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

from benchmarks.harness import models, stacks

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--families", nargs="+", default=["gemma4", "qwen3_5"], choices=["gemma4", "qwen3_5"])
ARGS.add_argument("--lengths", nargs="+", type=int, default=None, help="content tokens (default 8000 32000 64000)")
ARGS.add_argument("--questions", type=int, default=50)
ARGS.add_argument("--gemma4-layers", type=int, default=6, help="layers of the 31B widths (5 sliding : 1 full)")
ARGS.add_argument("--qwen3-5-layers", type=int, default=4, help="layers of the 27B widths (3 linear : 1 full)")
ARGS.add_argument("--smoke", action="store_true", help="tiny models on the CPU (checks the script and the path)")
ARGS.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder (required on the GPU, whose "
                  "machine has no packaged model; the packaged Gemma 3 one with --smoke)")
ARGS.add_argument("--out", type=Path, default=Path("/tmp/gpu_long_content.json"))

MAX_CONTENT = 65536  # --max-content-tokens, raised as the seed says ("tested to 64k")
GPU_BUDGET = 65536  # --token-budget on CUDA: a 64k content with 50 questions fits one pass (its lone pass)
WORDS = ("river", "ledger", "invoice", "harbor", "signal", "orchard", "copper", "meadow", "station", "lantern",
         "quarry", "timber", "beacon", "canal", "granite", "market", "valley", "engine", "letter", "garden")


def long_text(tokenizer, tokens: int, seed: int) -> str:
    """Sentences of random words and numbers until the text has about `tokens` tokens (counted per sentence)."""
    rng, parts, count = random.Random(seed), [], 0
    while count < tokens:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + f" {rng.randint(1, 9999)}."
        parts.append(sentence.capitalize())
        count += len(tokenizer(" " + sentence, add_special_tokens=False)["input_ids"])
    return " ".join(parts)


def queries(count: int) -> list[dict]:
    return [{"id": f"q{k:02d}", "template": f"\n\nQuestion: does the text mention the number {k * 37 + 11}?"
             "\nAnswer (yes or no):<?>", "options": [" yes", " no"]} for k in range(count)]


# ---- the two families ----------------------------------------------------------------------------------------------


def gemma4(o, device: str):
    """(config.json dict, load_model for the app, non-embedding parameters) of Gemma 4 at 31B widths."""
    from benchmarks import gpu_gemma4 as g4

    from spinfc.runtime.models.families import from_hf

    hf = g4.published_31b(o.gemma4_layers)
    if o.smoke:
        hf.update(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
                  num_global_key_value_heads=1, sliding_window=256)

    def load(name, _precision, device):
        return g4.build(from_hf(hf_of(name)), "fp16-mixed", device, name=name)
    return hf, "Gemma4ForCausalLM", load, lambda hf: stacks.gemma4_params(from_hf(hf))


def qwen3_5(o, device: str):
    """The same of Qwen3.5 at 27B widths (the server's default scheme: fp16 around a float32 residual stream)."""
    from benchmarks import gpu_qwen3_5 as q

    from spinfc.backend import reference, triton_ops
    from spinfc.runtime.models import build_model
    from spinfc.runtime.models.families import from_hf

    def load(name, precision, device):
        c = from_hf(hf_of(name))
        dtype = torch.float16 if device.startswith("cuda") else torch.float32
        return build_model(c, stacks.qwen3_5_state(c, device, dtype=dtype),
                           ops=triton_ops if device.startswith("cuda") else reference, device=device, name=name,
                           precision=precision,
                           weights_hash=f"random-qwen3_5-{c.layers}")
    c = q.tiny(1024) if o.smoke else q.shape(o.qwen3_5_layers, 1024)
    lin = c.linear
    hf = {"model_type": "qwen3_5_text", "hidden_size": c.hidden, "num_hidden_layers": c.layers,
          "num_attention_heads": c.heads, "num_key_value_heads": c.kv_heads, "head_dim": c.head_dim,
          "intermediate_size": c.intermediate, "vocab_size": c.vocab, "rms_norm_eps": c.norm_eps,
          "tie_word_embeddings": False, "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta,
                                                            "partial_rotary_factor": c.rotary_dim / c.head_dim},
          "layer_types": ["linear_attention" if x else "full_attention" for x in lin.layers],
          "linear_num_key_heads": lin.key_heads, "linear_num_value_heads": lin.value_heads,
          "linear_key_head_dim": lin.key_dim, "linear_value_head_dim": lin.value_dim,
          "linear_conv_kernel_dim": lin.conv_kernel}
    return hf, "Qwen3_5ForCausalLM", load, lambda hf: stacks.qwen3_5_params(from_hf(hf))


_CONFIGS: dict[str, dict] = {}


def hf_of(name: str) -> dict:
    return _CONFIGS[name]


def model_folder(family: str, hf: dict, architecture: str, tokenizer: Path | str) -> tuple[str, dict]:
    """A folder with the tokenizer (a folder, or a packaged model's name) and the config (no weights: the app's
    loader makes them)."""
    from spinfc.registry import load_tokenizer

    hf = {**hf, "vocab_size": len(load_tokenizer(str(tokenizer))), "architectures": [architecture]}
    folder = models.config_folder(Path(f"/tmp/spinfc-long-{family}"), hf, tokenizer)
    _CONFIGS[str(folder)] = hf
    return str(folder), hf


# ---- one family ----------------------------------------------------------------------------------------------------


def run_family(family: str, o, device: str, rate: float | None) -> dict:
    from litestar.testing import TestClient

    from spinfc.config import EngineSettings, Limits, ServerSettings, Settings
    from spinfc.registry import load_tokenizer
    from spinfc.server.app import create_app

    hf, architecture, load, params_of = (gemma4 if family == "gemma4" else qwen3_5)(o, device)
    name, hf = model_folder(family, hf, architecture, o.tokenizer or "gemma3-270m")
    params = params_of(hf)
    budget = None if o.smoke else GPU_BUDGET  # the CPU's default (2,048): every long content takes a lone pass
    # warm-up "none": the extraction grammars' scan of a 262k vocabulary (tens of seconds of CPU) is not what is
    # measured, and the first request of each length is not timed (the CUDA graphs are captured at load either way)
    settings = Settings(engine=EngineSettings(model=name, device=device, token_budget=budget, warmup="none"),
                        server=ServerSettings(debug=True), limits=Limits(max_content_tokens=MAX_CONTENT))
    tokenizer = load_tokenizer(name)
    short = long_text(tokenizer, 200, seed=99)
    rows, ok = [], True
    began = time.perf_counter()
    with TestClient(create_app(settings, load_model=load), timeout=900) as client:
        while client.get("/readyz").status_code != 200:  # the model is built and warmed in the app's lifespan
            if time.perf_counter() - began > 900:
                raise SystemExit(f"{family}: not ready after 900 s: {client.get('/readyz').text[:300]}")
            time.sleep(0.5)
        ready_s = time.perf_counter() - began
        card = client.get("/v1/models").json()["data"][0]
        for length in o.lengths:
            text = long_text(tokenizer, length, seed=length)
            body = {"inputs": [{"messages": [{"role": "user", "content": text}]},
                               {"messages": [{"role": "user", "content": short}]}],  # a short content beside it
                    "scoring": {"queries": queries(o.questions)}}
            if device.startswith("cuda"):
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            times, response = [], None
            for _ in range(1 if o.smoke else 3):  # the first also fills the floor cache; the best of the next two
                t = time.perf_counter()
                response = client.post("/v1/score", json=body)
                times.append(time.perf_counter() - t)
                if response.status_code != 200:
                    break
            row = {"family": family, "content_tokens": length, "status": response.status_code}
            if response.status_code != 200:
                ok = False
                row["error"] = response.text[:300]
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            data = response.json()
            plan = data["debug"]["plan"][0]
            segments = {s["content"]: s for s in plan["segments"]}
            long_id = "input-0"
            passes = [p for p in plan["passes"] if any(pl["content"] == long_id for pl in p["placements"])]
            alone = len(passes) == 1 and [pl["content"] for pl in passes[0]["placements"]] == [long_id]
            finite = all(math.isfinite(option["logprob"]) for result in data["inputs"][0]["results"]
                         for combination in result["combinations"] for option in combination["options"])
            processed = segments[long_id]["rows"]  # the content and its question tree, as the pass holds them
            seconds = min(times[1:] or times)
            floor_s = 2 * params * processed / (rate * 1e12) if rate else None
            row.update(seconds=round(seconds, 3), questions_per_s=round(o.questions / seconds, 1),
                       segment_rows=processed, alone_in_its_pass=alone, finite=finite,
                       peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1) if device.startswith("cuda")
                       else None,
                       floor_s=round(floor_s, 4) if floor_s else None,
                       of_floor=round(floor_s / seconds, 3) if floor_s else None,
                       attention_flops_share=round(attention_share(hf, processed, params), 3))
            ok &= alone and finite
            rows.append(row)
            print(json.dumps(row), flush=True)
    return {"family": family, "layers": hf["num_hidden_layers"], "non_embedding_params": params,
            "ready_s": round(ready_s, 1), "limits": {k: card["limits"].get(k) for k in
                                                     ("max_content_tokens", "token_budget", "max_pass_rows")},
            "rows": rows, "ok": ok}


def attention_share(hf: dict, tokens: int, params: int) -> float:
    """The causal attention's QK and PV products over the products of the weights, for one sequence of `tokens`
    (full layers see every earlier token, sliding ones their window; linear-attention layers none counted)."""
    types = hf.get("layer_types") or []
    work = 0.0
    for i in range(hf["num_hidden_layers"]):
        kind = types[i] if i < len(types) else "full_attention"
        if kind == "linear_attention":
            continue
        wide = hf.get("global_head_dim") if kind == "full_attention" and hf.get("global_head_dim") else hf["head_dim"]
        seen = tokens / 2 if kind == "full_attention" else min(hf.get("sliding_window", tokens), tokens / 2)
        work += 4 * hf["num_attention_heads"] * wide * tokens * seen
    return work / (work + 2 * params * tokens)


def main(argv: list[str] | None = None) -> int:
    o = ARGS.parse_args(argv)
    if o.tokenizer is None and not o.smoke:
        ARGS.error("--tokenizer DIR is required on the GPU (its machine has no packaged model)")
    o.lengths = o.lengths or ([3000, 5000] if o.smoke else [8000, 32000, 64000])
    device = "cpu" if o.smoke else "cuda:0"
    rate = None
    if not o.smoke:
        from benchmarks import gpu_gemma4 as g4

        rate = g4.matmul_rates(device)["half"]
    began = time.perf_counter()
    results = {"device": torch.cuda.get_device_name(0) if device != "cpu" else "cpu", "fp16_tflops": rate,
               "families": [run_family(family, o, device, rate) for family in o.families]}
    results["seconds"] = round(time.perf_counter() - began, 1)
    o.out.write_text(json.dumps(results, indent=1))
    print("\n| family | layers | content tokens | rows | alone | s | questions/s | of floor | attention share | "
          "peak GiB |\n| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for f in results["families"]:
        for r in f["rows"]:
            print(f"| {f['family']} | {f['layers']} | {r['content_tokens']} | {r.get('segment_rows')} | "
                  f"{r.get('alone_in_its_pass')} | {r.get('seconds')} | {r.get('questions_per_s')} | "
                  f"{r.get('of_floor')} | {r.get('attention_flops_share')} | {r.get('peak_gib')} |")
    ok = all(f["ok"] for f in results["families"])
    print(f"\n{'all checks passed' if ok else 'A CHECK FAILED'} ({results['seconds']} s); {o.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
