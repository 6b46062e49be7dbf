"""What the engine's worker does for extraction questions (the decode reads the keys and values of the pass that
scored its content, and the floor's prompt contexts):

    floors_first   a pass's floors ahead of its contents, and contents whose floor has neither run nor is in the
                   pass left for a later one (their floor is queued ahead of them, so it runs first)
    floor_scores   a floor's prompt contexts, taken when its pass is collected: it is delivered with its pass (not
                   after the pass's decode), so contents of any later pass find it
    Decoding       after the pass: every extraction question of its contents decoded in one batch, a slice of launches at a
                   time between scoring passes and the other passes' decodes (a score or a short decode behind it
                   waits a slice, not the whole decode), the results put into each unit's scores
    decodes_at_once  how many passes' decodes take turns: DECODES_AT_ONCE where each decode's batches are its own
                   (the CPU, a recurrent stack), fixed.CUDA_LANES where each runs in a lane of fixed buffers (CUDA)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

from spinfc.runtime import extract
from spinfc.runtime.extract.decode import WAITING, decode_threads
from spinfc.runtime.extract.fixed import CUDA_LANES
from spinfc.runtime.extract.recurrent import is_recurrent

log = logging.getLogger("spinfc.engine")

# Passes' decodes in flight at once, taking turns (each holds its pass's keys and values; their beams share one
# budget.DecodeMemory). An extraction pass waits while this many decode.
DECODES_AT_ONCE = 4


def decodes_at_once(model, device: str) -> int:
    """DECODES_AT_ONCE, or on CUDA, for a stack whose decode runs in fixed buffers, its lanes (fixed.CUDA_LANES: a
    pool and a workspace per launch shape each, which a second decode in one lane would overwrite)."""
    return CUDA_LANES if str(device).startswith("cuda") and not is_recurrent(model) else DECODES_AT_ONCE


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


def floor_scores(unit, scores: tuple, start: int, kept) -> tuple:
    """A floor unit's scores with its extraction questions' prompt contexts, copied from its pass's keys and values
    (`kept`) when the pass is collected: a floor is delivered with its pass, not after a decode, so a content in
    any later pass finds it (a content's decode reads its floor's contexts when it starts)."""
    job, _ = unit.consumers[0]
    item = extract.PassItem(questions=job.compiled.program.questions, start=start, prompt_rows=_rows(unit, start),
                            is_floor=True)
    return extract.with_entries(scores, extract.floor_contexts(kept, item))


def _rows(unit, start: int) -> tuple:
    """The unit's prompt rows as rows of its pass (its segment starts at `start`)."""
    return tuple(attrs.evolve(p, row=p.row + start) for p in unit.segment.prompt_rows)


class Decoding:
    """One pass's extraction decode, run in slices between the engine's scoring passes (`advance`): every
    extraction question of the pass's contents (not its floors: `floor_scores`) in one batch (`extract.extracting`),
    a unit whose request is withdrawn dropped at the next step. Once `done`, `results()` is each unit's scores with its entries (`extract.with_entries`),
    or every unit's None with `error` set when the decode raised."""

    def __init__(self, model, vocabulary, units: list, scores: list, starts: list[int], kept, stats, memory=None,
                 lane: int = 0):
        """`vocabulary`: the engine's (`grammars.Vocabulary`); `units` of a pass (contents, whose floors are
        delivered) and their `scores`, where each starts in it (`starts`), the pass's K/V (`kept`); `memory` the
        budget.DecodeMemory its beams share with the other decodes in flight; `lane` the fixed buffers it decodes in
        on CUDA (one no other decode in flight holds: `free_lane`)."""
        self.units, self.scores, self.stats, self.lane = units, scores, stats, lane
        items = []
        for unit, start in zip(units, starts):
            job, content = unit.consumers[0]
            items.append(extract.PassItem(
                questions=job.compiled.program.questions, start=start, prompt_rows=_rows(unit, start),
                is_floor=False, floor=job.scores.get(job.compiled.floor), live=unit.wanted,
                content_text=job.compiled.program.contents[content].text,
                has_media=bool(job.compiled.program.contents[content].media),
            ))
        self._on_cpu = kept.positions.device.type == "cpu"
        self._steps = extract.extracting(model, vocabulary, kept, items, memory, lane)
        self.done, self.error, self._entries, self._seconds = False, None, None, 0.0

    def wanted(self) -> bool:
        return any(unit.wanted() for unit in self.units)

    def advance(self, enough: Callable[[float], bool]) -> bool:
        """Run decode launches until the decode ends (True: `done`), `enough(seconds so far)` after a launch, or
        the memory its next group needs is held by other decodes (False: a turn for them)."""
        started = time.perf_counter()
        try:
            with decode_threads(self._on_cpu):
                while not self.done:
                    try:
                        launched = next(self._steps)
                    except StopIteration as finished:
                        self._entries, walked = finished.value
                        self.done = True
                        self.stats.decode_steps += walked.steps
                        self.stats.decode_rows += walked.beam_rows
                        self.stats.observe_decode(walked.beam_rows, self._seconds + time.perf_counter() - started)
                    except Exception as error:  # every unit of the pass fails with it
                        log.exception("extraction failed")
                        self.error, self.done = error, True
                    else:
                        if launched is WAITING or enough(time.perf_counter() - started):
                            return False
            return True
        finally:
            self._seconds += time.perf_counter() - started

    def close(self) -> None:
        """Stop the decode where it is (nobody waits for it, or the engine stops)."""
        self._steps.close()
        self.done = True

    def results(self) -> list:
        if self.error is not None or self._entries is None:  # failed, or stopped before its end
            return [None] * len(self.units)
        return [None if s is None else extract.with_entries(s, e) for s, e in zip(self.scores, self._entries)]


def free_lane(decodings) -> int:
    """A lane no decode in flight holds (0 where each decode's buffers are its own: only CUDA reads it)."""
    held = {decoding.lane for decoding in decodings}
    return next((lane for lane in range(CUDA_LANES) if lane not in held), 0)

