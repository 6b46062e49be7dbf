"""Extraction from the same read: the `<*>` `<n>` `<$>` `<gen>` slots, decoded from the scoring pass's keys and
values (the content is never prefilled again).

    engine pass with extraction questions -> kv.forward_keeping_kv (the pass's K/V, every layer)
    extract_pass(model, pass K/V, items)  -> per floor item: each question's PromptContext (kept with the floor's
                                             scores, for floor_p); per content item: each question's Searched or
                                             Generated result, every slot of every item decoded in one batch
                                             (decode.walk; a <n> or <$> slot's written numbers or amounts read
                                             beside its search, and unless it is `free` its answers only those
                                             of a value written: written.py), then the answers a search returns
                                             read on its floor (Forced, all their tokens at once)

The engine runs `extracting` (the same, one decode launch at a time: a generator) in slices between its scoring
passes and the other decodes in flight (scheduling.Decoding); what it returns replaces the extraction questions'
entries of each item's scores (ContentScores: a row of option logprobs per option question). An item whose `live()` turns false (its request
withdrawn) has its walkers dropped at the next step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import torch

from spinfc.ir.nodes import (EXTRACTION_SLOTS, SEARCHED_SLOTS, AmountSlot, GenerateSlot, NumberSlot, PromptRow,
                             Question)
from spinfc.runtime.extract.answers import (Generated, Searched, among_written, answer_text, generated_text, grounded,
                                            make_answer, merged, most_likely)
from spinfc.runtime.extract.budget import decode_tokens
from spinfc.runtime.extract.beams import Forced, Found, Sample, Search
from spinfc.runtime.extract.decode import Start, WalkStats, decode_threads, walking
from spinfc.runtime.extract.fixed import pool_storage
from spinfc.runtime.extract.grammars import Vocabulary, slot_regex, terminator
from spinfc.runtime.extract.kv import (
    KeyPool,
    PromptContext,
    forward_keeping_kv,
    gather_context,
    states_at,
    visible_rows,
)
from spinfc.runtime.extract.written import Written, written_answers, written_for
from spinfc.runtime.launch.generate import Sampling

KIND = {"TextSlot": "text", "NumberSlot": "number", "AmountSlot": "amount"}
SYNTAX = {"TextSlot": "<*>", "NumberSlot": "<n>", "AmountSlot": "<$>"}


def is_extraction(question: Question) -> bool:
    return isinstance(question.slot, EXTRACTION_SLOTS)


@attrs.frozen
class PassKV:
    """A pass as the decode reads it: its rows' tokens, positions and ends, and every layer's keys and values."""

    tokens: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    ends: torch.Tensor  # [T]
    keys: tuple[torch.Tensor, ...]  # per layer [T, Hk, D]
    values: tuple[torch.Tensor, ...]
    layout: object = None  # the pass's PassLayout (its spans, in the order of the engine's units)
    # a recurrent stack's states just before each extraction prompt row: {layer: {parent row: (conv, state)}}
    states: dict | None = None


@attrs.frozen
class PassItem:
    """One placed content of a pass: its questions, where its span starts, its prompt rows (pass rows), whether it
    is a floor, and (for a content) its floor's entries: one `PromptContext` per extraction question."""

    questions: tuple[Question, ...]
    start: int
    prompt_rows: tuple[PromptRow, ...]
    is_floor: bool
    floor: Sequence | None = None  # the floor's scores, when it ran in an earlier pass (or was cached)
    floor_item: int | None = None  # else the index of the floor's item in this pass
    live: Callable[[], bool] | None = None  # false once nobody waits for the item's answers
    # the content as written: a <n> or <$> slot's written numbers or amounts are read from it (written.py); None (or
    # a content with media, `has_media`, whose numbers may be in an image): its answers are the search's alone
    content_text: str | None = None
    has_media: bool = False


def extract_pass(model, kv: PassKV, items: Sequence[PassItem], vocabulary: Vocabulary | None = None
                 ) -> tuple[list[dict[int, object]], WalkStats]:
    """Per item, question index -> its entry (PromptContext on a floor, Searched or Generated on a content), and
    what the decode cost (`vocabulary`: the model's, built here where not given). Raises ValueError when a
    content's floor lacks a context (it must run first)."""
    steps = extracting(model, vocabulary or Vocabulary.of(model), kv, items)
    with decode_threads(kv.positions.device.type == "cpu"):
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value


def floor_contexts(kv: PassKV, item: PassItem) -> dict[int, PromptContext]:
    """A floor item's entries: each extraction question's `PromptContext` (copied from the pass, which can then be
    freed), what its contents' answers are read on for floor_p."""
    return {prompt.question: gather_context(kv.keys, kv.values, kv.tokens, kv.positions, kv.ends, prompt.row,
                                            item.start, kv.states)
            for prompt in item.prompt_rows if is_extraction(item.questions[prompt.question])}


def extracting(model, vocabulary: Vocabulary, kv: PassKV, items: Sequence[PassItem], memory=None, lane: int = 0):
    """`extract_pass` as a generator, reading `vocabulary` (the engine's: `grammars.Vocabulary`): yields after
    each decode launch (or `decode.WAITING`, for a turn in which
    `memory`, a `budget.DecodeMemory` shared with other decodes, had no room for its next group), returns its
    result (StopIteration's value); on CUDA its pool lives in `lane`'s buffers (fixed.py: a decode taking turns
    with others has a lane of its own). Run it inside `decode.decode_threads`."""
    tokenizer, stops, grammars = vocabulary.tokenizer, vocabulary.stops, vocabulary.grammars
    out: list[dict[int, object]] = [{} for _ in items]
    pool = KeyPool(kv.keys, kv.values, kv.positions,
                   pool_storage(model, int(kv.positions.shape[0]), kv.keys[0], lane))
    starts, owners = [], []  # owners: (item, question) per start
    written = {}  # start index of a <n> or <$> search -> (what the content writes, the Forced starts reading it)
    for i, item in enumerate(items):
        if item.is_floor:
            out[i] = floor_contexts(kv, item)
            continue
        for prompt in item.prompt_rows:
            question = item.questions[prompt.question]
            if not is_extraction(question):
                continue
            slot, end = question.slot, terminator(question.slot.stop)
            if isinstance(slot, GenerateSlot):
                walker = Sample(tokenizer, stops, end or "\n", Sampling(max_tokens=slot.max_tokens,
                                                               temperature=slot.temperature, seed=slot.seed))
            else:
                cut = end or "\n"
                regex = slot_regex(KIND[type(slot).__name__], slot.stop, slot.lead)
                walker = Search(grammars, regex, slot.beam_width, slot.max_tokens,
                                (cut, *grammars.ending_tokens(tokenizer, cut)), terminated=bool(end))
            table = visible_rows(kv.ends, prompt.row, item.start)
            if kv.states is not None and table.numel():  # a recurrent stack: the decode starts from this state
                pool.states[int(table[-1])] = states_at(kv.states, int(table[-1]))
            token, position = int(kv.tokens[prompt.row]), int(kv.positions[prompt.row])
            starts.append(Start(walker, table, token, position, slot.max_tokens, item.live))
            owners.append((i, prompt.question))
            if isinstance(slot, NumberSlot | AmountSlot) and item.content_text is not None and not item.has_media:
                found = written_for(slot, item.content_text)  # its written values, read exactly beside it
                answers = written_answers(tokenizer, list(found.spellings), slot.lead, end, slot.max_tokens,
                                          decode_tokens(slot))
                written[len(starts) - 1] = (found, _reading(answers, slot.beam_width, table, token, position,
                                                            item.live))
    reads = [read for _, reading in written.values() for read in reading]
    stats = yield from walking(model, pool, starts + reads, memory=memory)
    floor_starts, floor_owners = [], []
    for k, (start, (i, q)) in enumerate(zip(starts, owners)):
        walker = start.walker
        on_content, reading = written.get(k, (None, []))
        found = with_read(walker.found, [read.walker for read in reading]) if isinstance(walker, Search) else ()
        item, slot = items[i], items[i].questions[q].slot
        answers = candidates(tokenizer, stops, slot, found, on_content)
        if answers:
            context = item.floor[q] if item.floor is not None else \
                out[item.floor_item].get(q) if item.floor_item is not None else None
            if not isinstance(context, PromptContext):
                raise ValueError(f"question {q} has no floor context: the floor must run before its contents")
            answers = most_likely(answers, walker.width)
            floor_starts.append(_reading([a.tokens for a in answers], walker.width, pool.append(context),
                                         context.token, context.position, item.live))
            floor_owners.append((i, q, answers, frozenset(a.text for a in on_content.amounts) if on_content else
                                 frozenset()))
        elif isinstance(walker, Search):
            out[i][q] = Searched((), reason=empty_reason(slot, walker, on_content, bool(found)))
        else:
            question = items[i].questions[q]
            text = generated_text(tokenizer, tuple(walker.tokens), terminator(question.slot.stop) or "\n", stops)
            out[i][q] = Generated(text, tuple(walker.tokens), walker.logprob, walker.finish)
    floor_stats = yield from walking(model, pool, [s for reading in floor_starts for s in reading], memory=memory)
    for reading, (i, q, answers, spelled) in zip(floor_starts, floor_owners):
        floor_logprobs = [p for read in reading for p in read.walker.logprobs]
        out[i][q] = Searched(merged(tuple(attrs.evolve(a, floor_logprob=p) for a, p in zip(answers, floor_logprobs)),
                                    spelled))
    return out, WalkStats(stats.steps + floor_stats.steps, stats.beam_rows + floor_stats.beam_rows)


def _reading(answers: list[tuple[int, ...]], width: int, rows, token: int, position: int, live) -> list[Start]:
    """Forced walkers reading `answers` from a prompt (its pool `rows`, last `token` and `position`), at most
    `width` answers each: a walker takes no more slots at once than its slot's beams, which are known to fit."""
    return [Start(Forced(answers[k:k + width]), rows, token, position, max(map(len, answers[k:k + width])), live)
            for k in range(0, len(answers), width)]


def with_read(found: list[Found], reads: list[Forced]) -> list[Found]:
    """A search's answers and the answers read beside it (`reads`), each token sequence once (as the search found
    it), most likely first."""
    seen = {f.tokens for f in found}
    extra = {tokens: Found(tokens, logprob) for read in reads for tokens, logprob in zip(read.answers, read.logprobs)
             if tokens not in seen}
    return sorted([*found, *extra.values()], key=lambda f: -f.logprob)


def candidates(tokenizer, stops, slot, found: list[Found], written: Written | None) -> tuple:
    """A search's answers (`found`, with the written values read beside it) as `Answer`s: a bare number given the
    currency the content writes beside its value, and, unless the slot is `free`, only those of a value the content
    writes (`among_written`)."""
    answers = tuple(make_answer(slot, answer_text(tokenizer, f.tokens, terminator(slot.stop), stops, slot.lead),
                                f.tokens, f.logprob, 0.0) for f in found)
    if written is None:
        return answers
    answers = grounded(answers, written.amounts)
    return answers if slot.free else among_written(answers, written)


def empty_reason(slot, search: Search, written: Written | None = None, found: bool = False) -> str:
    """Why a search found no answer: none of a value the content writes (a slot not `free`), its beams ran to
    max_tokens without finishing, or the grammar left none."""
    kind = SYNTAX[type(slot).__name__]
    what = "amount" if isinstance(slot, AmountSlot) else "number"
    if written is not None and not slot.free and not written.values:
        return (f"the content writes no {what}, and a {kind} slot answers among the {what}s the content writes: "
                f"set `free` true on the query for the model's own answer")
    if written is not None and not slot.free and found:
        return (f"none of the answers found is a {what} the content writes, and none of those it writes "
                f"finished within max_tokens ({slot.max_tokens}): raise the slot's max_tokens, or set `free` true "
                "on the query for the model's own answers")
    if search.reached_max_tokens:
        return (f"no answer of the {kind} slot's form finished within max_tokens ({slot.max_tokens}): the model's "
                "likely continuations are longer or of another form; raise the slot's max_tokens, or ask with <*> "
                "or <gen> to see what the model writes")
    return (f"the model gives no probability to any answer of the {kind} slot's form here; ask with <*> or <gen> "
            "to see what the model writes")


def with_entries(scores: tuple, entries: dict[int, object]) -> tuple:
    """A content's scores with the extraction questions' rows replaced by their entries."""
    return tuple(entries.get(q, row) for q, row in enumerate(scores))


__all__ = ["PassItem", "PassKV", "extract_pass", "extracting", "floor_contexts", "forward_keeping_kv", "is_extraction",
           "with_entries", "SEARCHED_SLOTS"]
