"""The `debug` field of a response (trusted callers, or every caller under --debug): how the engine ran the request.

    {"plan": [{"budget": 512, "block": 128, "question_tree_tokens": 41, "questions": 3,
               "floor_cached": false, "processed_tokens": 130,
               "segments": [{"content": "input-0", "rows": 60, "answer_rows": 6, "reads": 6},
                            {"content": "floor", ...}],
               "passes": [{"pass": 7, "placements": [{"content": "floor", "start": 0, "rows": 44},
                                                     {"content": "input-0", "start": 128, "rows": 60}]}],
               "stats": {"content_tokens": 19, "prompt_tokens": 45, ...}}],
     "engine": {"passes": 12, "fill_ratio": 0.41, "floor_hits": 3, "floor_misses": 2, "queued": 0}}

`plan` has one entry per compiled part of the request (one, or one per round of /v1/decisions). A segment is one
content with its question tree, as it is placed in a shared pass: `rows` tokens starting at a block boundary;
`passes` says where the engine placed them (the engine's pass numbers; other requests' segments not shown).
`engine` is the engine's counters since it started (all requests), read when this response was made.
"""

from __future__ import annotations

from collections.abc import Sequence

from spinfc.passes.dedupe_prefixes import trie_size
from spinfc.runtime.engine import Engine, Scored


def passes_run(scored: Scored) -> list[dict]:
    """Where the engine placed the request's segments: per pass it ran them in (in order), each segment's content
    id, start row and rows. Run alone on a fresh server, this is `spinfc compile --emit plan`'s plan."""
    program, by_pass = scored.compiled.program, {}
    for index, content, start, rows in scored.placements:
        by_pass.setdefault(index, []).append({"content": program.contents[content].id, "start": start, "rows": rows})
    return [{"pass": index, "placements": sorted(placed, key=lambda p: p["start"])}
            for index, placed in sorted(by_pass.items())]


def plan_summary(parts: Sequence[Scored], engine: Engine) -> dict:
    plan = []
    for scored in parts:
        compiled = scored.compiled
        program = compiled.program
        plan.append({
            "budget": program.budget, "block": program.block,
            "question_tree_tokens": trie_size(program.trie), "questions": len(program.questions),
            "floor_cached": scored.floor_cached, "processed_tokens": scored.processed_tokens,
            "segments": [{"content": program.contents[s.content].id, "rows": s.length, "answer_rows": s.rows,
                          "reads": s.read_count} for s in compiled.segments],
            "passes": passes_run(scored),
            "stats": dict(program.stats),
        })
    stats = engine.stats
    return {"plan": plan, "engine": {"passes": stats.passes, "fill_ratio": round(stats.fill_ratio, 4),
                                     "floor_hits": stats.floor_hits, "floor_misses": stats.floor_misses,
                                     "queued": stats.queued}}
