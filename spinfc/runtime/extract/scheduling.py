"""What the engine's worker does for extraction questions (the decode reads the keys and values of the pass that
scored its content, and the floor's prompt contexts):

    floors_first   a pass's floors ahead of its contents, and contents whose floor has neither run nor is in the
                   pass left for a later one (their floor is queued ahead of them, so it runs first)
    extract_units  after the pass: every extraction question of it decoded in one batch (`extract_pass`), the
                   results put into each unit's scores
"""

from __future__ import annotations

import logging

import attrs

from spinfc.runtime import extract

log = logging.getLogger("spinfc.engine")


def extracts(unit) -> bool:
    """Whether the unit's request asks an extraction question (its pass keeps its keys and values)."""
    return unit.consumers[0][0].compiled.extracts


def extraction_prompt_rows(unit) -> list[int]:
    """The unit's extraction prompts' last rows (from its segment's start): where a recurrent stack keeps its
    states for the decode (`Runner.launch_keeping_kv`)."""
    questions = unit.consumers[0][0].compiled.program.questions
    return [p.row for p in unit.segment.prompt_rows if extract.is_extraction(questions[p.question])]


def floors_first(units: list, chosen: list[int]) -> list[int]:
    """`chosen` (indices into `units`, the waiting queue) reordered and filtered as above."""
    picked = [units[i] for i in chosen]
    if not any(map(extracts, picked)):
        return chosen

    def floor_ready(unit) -> bool:
        job = unit.consumers[0][0]
        floor = job.compiled.floor
        return floor in job.scores or any((job, floor) in other.consumers for other in picked)

    kept = [i for i, u in zip(chosen, picked) if u.floor_key is not None or not extracts(u) or floor_ready(u)]
    kept.sort(key=lambda i: units[i].floor_key is None)
    return kept or chosen  # cannot be empty while floors are queued ahead; run as chosen rather than stall


def extract_units(model, units: list, scores: list, pending, stats) -> tuple[list, Exception | None]:
    """Each unit's scores with its extraction entries (`extract.with_entries`), and None with the error when the
    decode raised (every unit of the pass then fails)."""
    items = []
    for unit, start in zip(units, pending.starts):
        job, _ = unit.consumers[0]
        floor_unit = next((k for k, other in enumerate(units) if other.floor_key is not None and
                           (job, job.compiled.floor) in other.consumers), None)
        items.append(extract.PassItem(
            questions=job.compiled.program.questions, start=start,
            prompt_rows=tuple(attrs.evolve(p, row=p.row + start) for p in unit.segment.prompt_rows),
            is_floor=unit.floor_key is not None,
            floor=None if unit.floor_key is not None or floor_unit is not None else job.scores.get(
                job.compiled.floor),
            floor_item=floor_unit if unit.floor_key is None else None,
        ))
    try:
        entries, walked = extract.extract_pass(model, pending.kept, items)
    except Exception as error:
        log.exception("extraction failed")
        return [None] * len(units), error
    stats.decode_steps += walked.steps
    stats.decode_rows += walked.beam_rows
    return [None if s is None else extract.with_entries(s, e) for s, e in zip(scores, entries)], None
