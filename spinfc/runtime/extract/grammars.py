"""Token constraints of the searched slots, with xgrammar (benchmarks/NOTES.md says why xgrammar).

Each slot kind is a regular expression over the answer's text, followed by its terminator:

    <*>   any text without the terminator, at least one character, then the terminator
    <n>   an optional space, a sign, digits (or groups of three with thousands separators), a decimal part
    <$>   an optional space, then a number written with `,` or `.` groups, a currency symbol, ISO code or word
          before it, after it or neither

The terminator is the first character of the template's text after the slot (`"` in `A: "<*>"`); when nothing
follows the slot, an answer ends at a newline or at the end of the turn (a stop token). The token that ends an
answer may go on past its terminator (`"\n`, `\n\n`: tokenizers merge what usually follows): any token holding the
terminator, whose text before it the grammar accepts, ends the answer there (`Grammars.ending`). A mask never
changes a log-probability, it only removes tokens: an answer's logprob is the model's own.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict

import attrs
import torch
import xgrammar

from spinfc.ir.decode_plan import slot_regex, terminator  # noqa: F401 (re-exported)
from spinfc.runtime.admit.chat_format import end_tokens
from spinfc.runtime.extract.kv import stack_of


class Grammars:
    """The compiled grammars of one tokenizer, and matchers for beams. `stop_tokens` end a turn."""

    def __init__(self, tokenizer, vocab: int, stop_tokens: frozenset[int]):
        self.vocab, self.stop_tokens = vocab, stop_tokens
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab, stop_token_ids=sorted(stop_tokens))
        # compiled grammars are kept here, the GRAMMARS_REMEMBERED used last (xgrammar's own cache is unbounded)
        self._compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)
        self._compiled: OrderedDict[str, xgrammar.CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self._endings: OrderedDict[str, tuple[torch.Tensor, dict[int, str]]] = OrderedDict()
        self._texts: list[str] | None = None
        self._stops_cleared = torch.full((xgrammar.get_bitmask_shape(1, vocab)[1],), -1, dtype=torch.int32)
        for token in stop_tokens:
            if token < vocab:
                self._stops_cleared[token // 32] &= ~(1 << (token % 32))
        # xgrammar matches a special token by its surface text (`<unused0>`, `<|im_start|>`): no answer holds one
        self.special = frozenset(i for i, t in tokenizer.added_tokens_decoder.items() if t.special) - stop_tokens
        self._batch = None  # an xgrammar.BatchGrammarMatcher, made on first use
        self._no_special = torch.full_like(self._stops_cleared, -1)
        for token in self.special:
            if token < vocab:
                self._no_special[token // 32] &= ~(1 << (token % 32))

    def ending_tokens(self, tokenizer, end: str) -> tuple[torch.Tensor, dict[int, str]]:
        """The tokens whose text holds `end` (a bitmask [ceil(V / 32)] int32, and each one's text), special tokens
        excluded; decoded once per terminator."""
        with self._lock:
            if end not in self._endings:
                started = time.perf_counter()
                special = set(tokenizer.all_special_ids) | self.special
                if self._texts is None:  # every token's text, decoded once for all terminators
                    self._texts = tokenizer.batch_decode([[i] for i in range(min(self.vocab, len(tokenizer)))])
                texts = self._texts
                holding = {i: t for i, t in enumerate(texts) if end in t and i not in special}
                bits = torch.zeros(self._stops_cleared.shape, dtype=torch.int64)
                for i in holding:
                    bits[i // 32] |= 1 << (i % 32)
                bits = torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32)
                self._endings[end] = (bits, holding)
                log.info("found the tokens holding the extraction terminator %r in %.1f s (once a server)", end,
                         time.perf_counter() - started)
            return _used(self._endings, end)

    def ends_with(self, matcher, text: str) -> xgrammar.GrammarMatcher | None:
        """A copy of `matcher` after `text` if the grammar accepts it and is then complete, else None."""
        fork = matcher.fork()
        if not fork.accept_string(text) or not bool(self.only_stops(self.masks([fork]))[0]):
            return None
        return fork

    def matcher(self, regex: str) -> xgrammar.GrammarMatcher:
        """A fresh matcher at the start of an answer of `regex`."""
        with self._lock:
            if regex not in self._compiled:
                self._compiled[regex] = self._compiler.compile_regex(regex)
            compiled = _used(self._compiled, regex)
        return xgrammar.GrammarMatcher(compiled)

    def masks(self, matchers) -> torch.Tensor:
        """The allowed next tokens of each matcher as a bitmask: [B, ceil(V / 32)] int32 (xgrammar's layout),
        special tokens other than the stop tokens left out."""
        bitmask = xgrammar.allocate_token_bitmask(len(matchers), self.vocab)
        for i, matcher in enumerate(matchers):
            matcher.fill_next_token_bitmask(bitmask, i)
        return bitmask & self._no_special[None, :]

    def fill(self, matchers, bitmask: torch.Tensor, rows: list[int]) -> None:
        """Write the masks of `matchers` (as `masks` builds them) into rows `rows` of `bitmask` ([N, ceil(V / 32)]
        int32 on the host), the matchers' work spread over threads (xgrammar's batch matcher)."""
        if self._batch is None:
            self._batch = xgrammar.BatchGrammarMatcher()
        self._batch.batch_fill_next_token_bitmask(list(matchers), bitmask, list(rows))
        bitmask.numpy()[rows] &= self._no_special.numpy()  # NumPy: ~15x faster than torch's indexed update

    def only_stops(self, bitmask: torch.Tensor) -> torch.Tensor:
        """[B] bool: rows of `bitmask` that allow nothing but stop tokens (the answer is complete)."""
        return ((bitmask & self._stops_cleared[None, :]) == 0).all(dim=1)

    @staticmethod
    def apply(logprobs: torch.Tensor, bitmask: torch.Tensor) -> None:
        """Set the log-probabilities of tokens the bitmask forbids to -inf, in place (logprobs: [B, V] float32)."""
        xgrammar.apply_token_bitmask_inplace(logprobs, bitmask.to(logprobs.device))


log = logging.getLogger("spinfc.engine")
GRAMMARS_REMEMBERED = 64  # compiled grammars and terminators' token tables kept per tokenizer (a slot kind, lead and
# terminator each: a template's text picks the terminator, so a stream of requests could ask for any number)


def _used(kept: OrderedDict, key):
    """`kept[key]`, now the most recently used; the least recently used beyond GRAMMARS_REMEMBERED dropped."""
    kept.move_to_end(key)
    while len(kept) > GRAMMARS_REMEMBERED:
        kept.popitem(last=False)
    return kept[key]

@attrs.frozen
class Vocabulary:
    """What one engine's extraction decodes read of its model's tokenizer, built once by the engine that owns it
    (its scheduler, on the first extraction): its own copy of the tokenizer (a tokenizer is not shared across
    threads), the stop tokens that end a turn, and the grammars' table of the vocabulary (about a second to build
    on Gemma 3)."""

    tokenizer: object
    stops: frozenset[int]
    grammars: Grammars

    @classmethod
    def of(cls, model) -> "Vocabulary":
        """`model`'s (a stack with a tokenizer, `Model.tokenizer`, or an engine's wrapper of one)."""
        stack, _ = stack_of(model)
        started = time.perf_counter()
        tokenizer = copy.deepcopy(stack.tokenizer)
        stops = end_tokens(tokenizer)
        grammars = Grammars(tokenizer, stack.config.vocab, stops)
        log.info("built the extraction grammars' table of a %d-token vocabulary in %.1f s (once an engine)",
                 stack.config.vocab, time.perf_counter() - started)
        return cls(tokenizer, stops, grammars)


def parse_number(text: str) -> int | float:
    """The value of a number answer (`NUMBER`, with an optional leading space): an int without a decimal part."""
    cleaned = text.strip().replace(",", "")
    return float(cleaned) if "." in cleaned else int(cleaned)
