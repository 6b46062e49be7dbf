"""One large shape per family, served at defaults and timed over HTTP beside its floor.

Each shape keeps the published model's widths with fewer layers (the floor scales with them, so the fraction of the
floor is the full model's, give or take its per-layer costs); random bf16 weights written by transformers on the
device (harness/models.py), SmolLM2's tokenizer (`--tokenizer`: a real vocabulary, so the seed-shaped job has its
token counts). The job is the seed's (harness/jobs.py: 24 contents of ~470 tokens, 56 yes/no questions of ~20
tokens), sent as one /v1/score request after one untimed request; questions/s is the best of three. The floor is 2 x
non-embedding parameters x the tokens the request put into passes (`usage.input_tokens`) at the card's bf16 rate
(786 TFLOP/s, BENCHMARKS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from benchmarks.harness.jobs import text_job
from benchmarks.harness.timing import best_of

BF16_FLOPS = 786e12


def time_job(url: str, tokenizer_dir: Path, contents: int, questions: int, content_tokens: int) -> dict:
    """The seed-shaped job over HTTP as one request: one untimed run, then the best of three."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    job = text_job(tokenizer, contents, content_tokens, questions)

    def send() -> dict:
        answer = httpx.post(url + "/v1/score", json=job.whole, timeout=600)
        answer.raise_for_status()
        return answer.json()

    timed = best_of(send, rounds=3)
    return {"seconds": timed.best, "questions": job.questions, "tokens": timed.result["usage"]["input_tokens"],
            "questions_per_s": timed.rate(job.questions)}


def with_floor(timing: dict, params: int, layers: int) -> dict:
    floor_seconds = 2 * params * timing["tokens"] / BF16_FLOPS
    return {**timing, "layers": layers, "non_embedding_params": params,
            "floor_questions_per_s": timing["questions"] / floor_seconds,
            "of_floor": floor_seconds / timing["seconds"]}


def table(rows: list[dict]) -> str:
    lines = ["| shape | layers | ready s | questions/s | floor q/s | of the floor | tokens/job |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['shape']} | - | - | {r['error'][:80]} | - | - | - |")
            continue
        lines.append(f"| {r['shape']} | {r['layers']} | {r['ready_after']:.0f} | {r['questions_per_s']:,.0f} | "
                     f"{r['floor_questions_per_s']:,.0f} | {r['of_floor']:.2f} | {r['tokens']:,} |")
    return "\n".join(lines)


def dump(rows: list[dict]) -> str:
    return json.dumps(rows, indent=1)
