"""What extraction decoding costs, counted before it runs: its work (for the engine's queued-work bound and the
request limit `max_decode_tokens`) and its memory (each decode batch's own keys and values, within a budget).

    decode_tokens(slot)      the most tokens one slot decodes for one input: max_tokens for each of its beams
    decode_work(program)     a request's decode rows at most: every input's slots, their answers read on the floor,
                             a <n> or <$> slot's written numbers or amounts read
    slot_bytes(model, rows)  one slot's own keys and values, every layer: what a beam holds while it is walked
    slots_within(model, n)   how many slots of n tokens a CPU decode batch holds within DECODE_MEMORY_BYTES
    check_fits(model, prog)  Refused("decode_too_large") for a slot whose beams alone do not fit: never run
    DecodeMemory             the budget shared by every decode in flight: a group takes its bytes before its batch
                             is made and gives them back when it ends

The walk (decode.py) takes walkers in groups of `slots_within`, one group after the other, so a request's decode
holds at most the budget whatever it asks (sixteen inputs of ten 16-beam slots once took 9 GB at once); decodes that
take turns (the engine's) share one `DecodeMemory`, so together they hold at most the budget too.
"""

from __future__ import annotations

import threading

from spinfc.ir.nodes import (
    EXTRACTION_SLOTS,
    AmountSlot,
    GenerateSlot,
    NumberSlot,
    Program,
    TextSlot,
)
from spinfc.runtime.admit.refused import Refused
from spinfc.runtime.extract.fixed import slot_tokens
from spinfc.runtime.extract.kv import stack_of

DECODE_MEMORY_BYTES = 1 << 30  # a CPU decode batch's own keys and values at most (CUDA's are fixed buffers)


def decode_tokens(slot) -> int:
    """The most tokens an extraction slot decodes for one input: `max_tokens` for each of its beams (one for
    <gen>)."""
    return slot.max_tokens * (1 if isinstance(slot, GenerateSlot) else slot.beam_width)


# A slot's walks per input, each of at most `decode_tokens` rows: <gen> its sampling; <*> its search and its answers
# read on the floor; <n> <$> also the numbers or amounts the content writes, read on the content and the floor
# (written.py)
WALKS = {GenerateSlot: 1, TextSlot: 2, NumberSlot: 4, AmountSlot: 4}


def decode_work(program: Program, inputs: int) -> int:
    """Rows a request's decode feeds at most over `inputs` contents: each slot's `decode_tokens` for each of its
    `WALKS`."""
    per_input = sum(decode_tokens(q.slot) * WALKS[type(q.slot)]
                    for q in program.questions if isinstance(q.slot, EXTRACTION_SLOTS))
    return per_input * inputs


def slot_bytes(model, tokens: int) -> int:
    """Bytes of one decode slot holding `tokens` tokens (the row count it is rounded up to), every layer's key and
    value."""
    stack, _ = stack_of(model)
    c = stack.config
    itemsize = getattr(getattr(stack, "dtype", None), "itemsize", 4)
    return c.layers * 2 * slot_tokens(tokens + 1) * c.kv_heads * c.head_dim * itemsize


def slots_within(model, tokens: int) -> int:
    """Slots of `tokens` tokens a CPU decode batch holds within DECODE_MEMORY_BYTES (at least one)."""
    return max(1, DECODE_MEMORY_BYTES // slot_bytes(model, tokens))


def check_fits(model, program: Program) -> None:
    """Refuse a request one of whose searched slots needs more slots at once (its beam_width) than a decode batch
    holds at its max_tokens: it could not run within the memory budget."""
    if getattr(stack_of(model)[0], "config", None) is None:  # a stand-in without a stack (tests)
        return
    for question in program.questions:
        slot = question.slot
        if not isinstance(slot, EXTRACTION_SLOTS) or isinstance(slot, GenerateSlot):
            continue
        fits = slots_within(model, slot.max_tokens)
        if slot.beam_width > fits:
            need = slot.beam_width * slot_bytes(model, slot.max_tokens)
            raise Refused("decode_too_large", f"query {question.query_id!r}: beam_width {slot.beam_width} at "
                          f"max_tokens {slot.max_tokens} needs {need / 2**20:,.0f} MiB of keys and values at once, "
                          f"more than this server's decode holds ({DECODE_MEMORY_BYTES / 2**20:,.0f} MiB: {fits} "
                          "beams of that length): lower beam_width or max_tokens")


class DecodeMemory:
    """DECODE_MEMORY_BYTES (or `total`) shared by the decodes in flight. A group is at most the whole budget
    (`slots_within`), and each decode holds one group at a time, so a group that waits is taken once the groups
    holding the memory end: decodes alternate group by group when memory is short, and never deadlock."""

    def __init__(self, total: int = DECODE_MEMORY_BYTES):
        self.total, self.used = total, 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Hold `size` bytes if they are free (True), else nothing (False: try again at a later turn). Nothing else
        held, any size is given (a group alone is within the budget by construction)."""
        with self._lock:
            if self.used and self.used + size > self.total:
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.used -= size
