"""The performance round: where a served pass's time goes, for each family and scheme, in one device call.

For each model (`--models`, default all of MODELS) at its published widths with `--layers`-style depths (random
weights, SmolLM2's tokenizer from `--tokenizer DIR`: the device has no packaged model), `spinfc serve` at defaults
in a child process (the weights made by `load` below in the server's process: the snapshot's own load, or its fp8
scheme built from it), and over HTTP, on contents no earlier request held (harness/jobs.py `fresh`):

    questions/s     the seed-shaped job (24 contents x 56 yes/no questions) in three patterns: one request of every
                    content; 4 concurrent requests of 6; 24 concurrent one-content requests (best of `--reps`)
    of the floor    2 x non-embedding parameters x the job's processed tokens (`usage.input_tokens`) at 786 TFLOP/s
                    (bf16; fp8 schemes also against 1,430), over the measured time
    of sustained    the same job's linear products alone, replayed in one CUDA graph in this run
                    (harness/products.py), over the measured time: what the server adds above the products
    profile         one request of the job under torch's profiler inside the server (harness/profiling.py):
                    products, attention, norms/rope/activations, quantize, recurrent scan, answer head, copies, the
                    GPU's idle time between kernels (short gaps) and between passes (long gaps), the request's time
                    outside the kernels' span, and the rows of padding (spinfc_rows_launched over tokens processed)

    python -m benchmarks.perf_round --tokenizer DIR [--models 8b 8b-fp8-static ...] [--out FILE]
    python -m benchmarks.perf_round --tokenizer DIR --smoke       # tiny models on the CPU: checks the script

The table goes to stdout and, as markdown, to $OUT/perf_round.md (BENCHMARKS.md's "The performance round"); every
figure to $OUT/perf_round.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import attrs
import httpx

from benchmarks.harness import clients, jobs, models, profiling, report, serving

BF16_FLOPS, FP8_FLOPS = 786e12, 1430e12


@attrs.frozen
class Model:
    shape: str  # harness/models.py SHAPES
    layers: int
    scheme: str = "default"  # default (the server's own load) or a quantized scheme built from the snapshot


MODELS = {
    "8b": Model("llama-3-8b", 16),
    "8b-fp8-static": Model("llama-3-8b", 16, "fp8-static-mixed"),
    "8b-fp8-dynamic": Model("llama-3-8b", 16, "fp8-dynamic-mixed"),
    "gemma4": Model("gemma4-31b", 12),
    "qwen3_5": Model("qwen3_5-27b", 16),
}

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer folder (tokenizer.json, ...)")
ARGS.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
ARGS.add_argument("--layers", type=int, default=None, help="every model's layers (default: each model's own)")
ARGS.add_argument("--reps", type=int, default=2, help="timed runs of each pattern, each on new contents")
ARGS.add_argument("--patterns", nargs="+", default=["one", "4x6", "24x1"], choices=["one", "4x6", "24x1"])
ARGS.add_argument("--no-profile", action="store_true", help="skip the profiled request")
ARGS.add_argument("--extraction", nargs="*", default=["8b", "gemma4"], help="the models also sent the job with two "
                  "extraction slots per content (`<*>` twice; `<n>` and `<$>`)")
ARGS.add_argument("--smoke", action="store_true", help="tiny models and job on the CPU: checks the script")
ARGS.add_argument("--work", type=Path, default=None, help="snapshots and logs (default: a temp dir)")
ARGS.add_argument("--out", type=Path, default=None, help="the results as JSON (also $OUT/perf_round.json)")
ARGS.add_argument("--root", type=Path, default=serving.ROOT, help="the checkout whose `spinfc serve` is measured "
                  "(default: this one; an older tree for a before/after on the same card)")
ARGS.add_argument("--server-arg", action="append", default=[], help="a further `spinfc serve` flag (repeatable): "
                  "measures a setting against the defaults")


def load(scheme: str, profile: str | None):
    """The server's `load_model` (harness/serve_app.py): the snapshot as `spinfc serve` loads it, or its
    quantized `scheme` built from the same weights; with `profile`, the profiler's watcher started beside it."""
    def load_model(name, precision, device, **kwargs):
        from spinfc.runtime.load.loader import load_default

        model = load_default(name, precision, device, **kwargs) if scheme == "default" else \
            quantized(Path(name), scheme, device)
        if profile and device.startswith("cuda"):
            profiling.watch(profile)
        return model
    return load_model


def quantized(snapshot: Path, scheme: str, device: str):
    from safetensors.torch import load_file

    from benchmarks.harness.launches import seed_job
    from benchmarks.quant_parts import build
    from spinfc.runtime.models.families import from_hf

    config = from_hf(json.loads((snapshot / "config.json").read_text()))
    state = {}
    for file in sorted(snapshot.glob("*.safetensors")):
        state.update(load_file(str(file), device=device))
    calibration = seed_job(config.vocab, contents=8, content_tokens=470, questions=56, seed=7).launches[:1]
    return build(config, state, scheme, device, calibration=calibration, served_name=str(snapshot))


def metric(url: str, name: str) -> float:
    return clients.metric(httpx.get(url + "/metrics", timeout=30).text, name)


def measure(o, name: str, spec: Model, snapshot: Path, params: int, job: jobs.TextJob, work: Path) -> dict:
    profile = work / f"profile-{name}"
    loader = ("benchmarks.perf_round:load", {"scheme": spec.scheme, "profile": str(profile)})
    device = "cpu" if o.smoke else "cuda:0"
    bodies = {"one": lambda j: [j.whole], "4x6": lambda j: j.split(4), "24x1": lambda j: j.one_each()}
    out: dict = {"model": name, "shape": spec.shape, "layers": o.layers or spec.layers, "scheme": spec.scheme,
                 "non_embedding_params": params, "patterns": {}}
    with serving.served(snapshot, device, work / f"server-{name}.log", loader=loader, args=tuple(o.server_arg),
                        root=o.root.resolve(), timeout=420) as server:
        out["ready_s"] = round(server.ready_after, 1)
        warm = clients.pattern(server.url, [job.whole], 1, job.questions)  # the floor cached, as a user's first
        out["tokens"] = warm["answers"][0]["usage"]["input_tokens"]
        for pattern in o.patterns:
            runs = []
            for rep in range(o.reps):
                sent = bodies[pattern](jobs.fresh(job, f"{name}-{pattern}-{rep}"))
                runs.append(clients.pattern(server.url, sent, len(sent), job.questions))
            best = min(runs, key=lambda r: r["seconds"])
            out["patterns"][pattern] = {"seconds": best["seconds"], "questions_per_s": best["questions_per_s"],
                                        "passes": best["passes"], "429": sum(r["429"] for r in runs),
                                        "all_questions_per_s": [r["questions_per_s"] for r in runs]}
            print(f"  {name} {pattern}: {best['questions_per_s']:,.0f} q/s "
                  f"({[r['questions_per_s'] for r in runs]}), {best['passes']} passes", flush=True)
        if name in o.extraction:
            out["extraction"] = extraction(server.url, job, name)
        if not o.no_profile and not o.smoke:
            rows, tokens = metric(server.url, "spinfc_rows_launched_total"), metric(server.url,
                                                                                   "spinfc_tokens_processed_total")
            with profiling.Window(profile) as window:
                began = time.perf_counter()
                clients.pattern(server.url, [jobs.fresh(job, f"{name}-profile").whole], 1, job.questions)
                wall = time.perf_counter() - began
            out["profile"] = profiling.breakdown(window.kernels(), wall)
            rows = metric(server.url, "spinfc_rows_launched_total") - rows
            tokens = metric(server.url, "spinfc_tokens_processed_total") - tokens
            out["profile"]["padding_rows"] = round(1 - tokens / rows, 3) if rows else None
    if not o.smoke:
        from benchmarks.harness.products import products, sustained_seconds
        from spinfc.config import CUDA_TOKEN_BUDGET

        out["sustained_s"] = sustained_seconds(products(snapshot), out["tokens"], CUDA_TOKEN_BUDGET, spec.scheme)
    return fractions(out)


SLOTS = {"<*> x2": ("\n\nQuestion: Which place does the article name first?\nAnswer:<*>",
                    "\n\nQuestion: Which organisation does the article name first?\nAnswer:<*>"),
         "<n> + <$>": ("\n\nQuestion: How many people or things does the article count first?\nAnswer:<n>",
                       "\n\nQuestion: What amount of money does the article mention?\nAnswer:<$>")}


def extraction(url: str, job: jobs.TextJob, name: str) -> dict:
    """The job with two extraction slots per content beside its questions, one request on new contents, against
    the same request without them (new contents too): questions/s and the share of the time the slots add."""
    plain = clients.pattern(url, [jobs.fresh(job, f"{name}-plain").whole], 1, job.questions)
    out = {"plain_seconds": plain["seconds"]}
    for label, templates in SLOTS.items():
        slots = tuple({"id": f"x{i}", "template": t} for i, t in enumerate(templates))
        asked = attrs.evolve(jobs.fresh(job, f"{name}-{label}"), queries=job.queries + slots)
        answered = len(job.texts) * len(asked.queries)
        run = clients.pattern(url, [asked.whole], 1, answered)
        out[label] = {"seconds": run["seconds"], "questions_per_s": run["questions_per_s"],
                      "decode_share": round(max(0.0, 1 - plain["seconds"] / run["seconds"]), 3)}
        print(f"  {name} extraction {label}: {run['questions_per_s']:,.0f} q/s, {run['seconds']:.2f} s against "
              f"{plain['seconds']:.2f} s without the slots", flush=True)
    return out


def fractions(out: dict) -> dict:
    floor = 2 * out["non_embedding_params"] * out["tokens"]
    for r in out["patterns"].values():
        r["of_floor"] = round(floor / BF16_FLOPS / r["seconds"], 3)
        if out["scheme"].startswith("fp8"):
            r["of_fp8_floor"] = round(floor / FP8_FLOPS / r["seconds"], 3)
        if "sustained_s" in out:
            r["of_sustained"] = round(out["sustained_s"] / r["seconds"], 3)
    return out


def markdown(results: list[dict]) -> str:
    rows = []
    for r in results:
        for pattern, p in r["patterns"].items():
            rows.append([r["model"], r["layers"], pattern, f"{p['questions_per_s']:,.0f}", p["of_floor"],
                         p.get("of_fp8_floor", "-"), p.get("of_sustained", "-"), p["passes"]])
    table = report.table(["model", "layers", "pattern", "questions/s", "of bf16 floor", "of fp8 floor",
                          "of sustained", "passes"], rows)
    profiles = []
    for r in results:
        if "profile" in r and "parts_ms" in r["profile"]:
            p = r["profile"]
            parts = ", ".join(f"{k} {v}" for k, v in p["parts_ms"].items())
            idle = ", ".join(f"{k} {v}" for k, v in p["idle_ms"].items())
            profiles.append(f"- **{r['model']}** ({p['wall_ms']} ms wall, {p['kernel_span_ms']} ms of kernels' "
                            f"span, {p['busy_ms']} busy; sustained products {r.get('sustained_s', 0) * 1000:.1f}"
                            f" ms): {parts}; idle {idle}; outside the span {p['outside_span_ms']}; padding "
                            f"{p['padding_rows']} of rows")
    extracted = [[r["model"], label, f"{x['questions_per_s']:,.0f}", x["seconds"], r["extraction"]["plain_seconds"],
                  x["decode_share"]] for r in results for label, x in r.get("extraction", {}).items()
                 if label != "plain_seconds"]
    return (table + "\n\nProfile of one request of the job (ms of GPU time):\n\n" + "\n".join(profiles) + "\n"
            + ("\nExtraction, two slots per content beside the 56 questions (one request):\n\n" + report.table(
                ["model", "slots", "questions/s", "seconds", "seconds without", "share the slots add"], extracted)
               + "\n" if extracted else ""))


def main(argv: list[str] | None = None) -> int:
    o = ARGS.parse_args(argv)
    import transformers

    work = o.work or Path(tempfile.mkdtemp(prefix="spinfc-perf-"))
    job = jobs.text_job(transformers.AutoTokenizer.from_pretrained(str(o.tokenizer)),
                        **(jobs.SMALL if o.smoke else {}))
    results, snapshots = [], {}
    for name in o.models:
        spec = MODELS[name]
        layers = o.layers or spec.layers
        key = (spec.shape, layers)
        try:
            if key not in snapshots:
                for old in snapshots.values():  # one snapshot on disk at a time (a 31B shape's is tens of GB)
                    shutil.rmtree(old[0], ignore_errors=True)
                began = time.perf_counter()
                folder = work / f"{spec.shape}-{layers}"
                params = models.snapshot(spec.shape, folder, o.tokenizer, 4 if o.smoke else layers, o.smoke,
                                         "cpu" if o.smoke else "cuda:0")
                snapshots = {key: (folder, params)}
                print(f"{spec.shape} x {layers}: {params / 1e9:.2f} B non-embedding parameters, written in "
                      f"{time.perf_counter() - began:.0f} s", flush=True)
            folder, params = snapshots[key]
            results.append(measure(o, name, spec, folder, params, job, work))
        except Exception as error:  # one model's failure is reported, the others still run
            print(f"{name}: FAILED: {type(error).__name__}: {str(error)[-3000:]}", flush=True)
            results.append({"model": name, "error": f"{type(error).__name__}: {str(error)[-3000:]}",
                            "patterns": {}})
        report.write_json(results, o.out, "perf_round.json")
    text = markdown([r for r in results if "error" not in r])
    print("\n" + text)
    for r in results:
        if "error" in r:
            print(f"{r['model']}: FAILED ({r['error'][:300]})")
        elif "profile" in r:
            print(f"{r['model']} top kernels: {json.dumps(r['profile'].get('top'))}")
    report.write_text(text, "perf_round.md")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
