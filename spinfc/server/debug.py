"""The `debug` field of a response (trusted callers, or every caller under --debug): how the engine ran the request.

    {"plan": [{"budget": 512, "block": 128, "question_tree_tokens": 41, "questions": 3,
               "compiled_passes": 1, "floor_cached": false, "processed_tokens": 130,
               "segments": [{"content": "input-0", "rows": 60, "answer_rows": 6, "reads": 6},
                            {"content": "floor", ...}],
               "stats": {"content_tokens": 19, "prompt_tokens": 45, ...}}],
     "engine": {"passes": 12, "fill_ratio": 0.41, "floor_hits": 3, "floor_misses": 2, "queued": 0}}

`plan` has one entry per compiled part of the request (one, or one per round of /v1/decisions). A segment is one
content with its question tree, as it is placed in a shared pass: `rows` tokens starting at a block boundary.
`engine` is the engine's counters since it started (all requests), read when this response was made.
"""

from __future__ import annotations

from collections.abc import Sequence

from spinfc.passes.dedupe_prefixes import trie_size
from spinfc.runtime.engine import Engine, Scored


def plan_summary(parts: Sequence[Scored], engine: Engine) -> dict:
    plan = []
    for scored in parts:
        compiled = scored.compiled
        program = compiled.program
        plan.append({
            "budget": program.budget, "block": program.block,
            "question_tree_tokens": trie_size(program.trie), "questions": len(program.questions),
            "compiled_passes": len(program.plan.passes) if program.plan else 0,
            "floor_cached": scored.floor_cached, "processed_tokens": scored.processed_tokens,
            "segments": [{"content": program.contents[s.content].id, "rows": s.length, "answer_rows": s.rows,
                          "reads": len(s.reads)} for s in compiled.segments],
            "stats": dict(program.stats),
        })
    stats = engine.stats
    return {"plan": plan, "engine": {"passes": stats.passes, "fill_ratio": round(stats.fill_ratio, 4),
                                     "floor_hits": stats.floor_hits, "floor_misses": stats.floor_misses,
                                     "queued": stats.queued}}
