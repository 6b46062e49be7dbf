"""The request limits checked on the decoded body, before anything is parsed or tokenized: cheapest first, so a
hostile body costs microseconds rather than seconds of parsing, tokenizing and expanding.

    characters   no token of the served model covers more than `longest` characters (`longest_token`, read once
                 from its vocabulary when the model loads), so a text of more than limit x longest characters has
                 more than `limit` tokens, whatever the tokenizer makes of it: refused with the limit's own code
                 (`max_content_tokens_exceeded`, ...), the message saying "at least N tokens" and why
    counts       questions (queries x placeholder values) and options, counted on the JSON before any grid is built

A template's source counts as its filled text (its markup is a few characters, so this refuses only a template
that could not fit). What passes here is counted exactly later, on the tokenized program (runtime/admit/limits.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

from spinfc.config import LimitExceeded, Limits
from spinfc.frontend.request_schema import ContentPart, Message, ScoreRequest, ScoringQuery
from spinfc.registry import load_tokenizer


def longest_token(tokenizer) -> int:
    """The most characters one token of `tokenizer` covers: its longest vocabulary entry (a byte-level or
    sentencepiece entry is at least as long as the text it decodes to)."""
    return max(map(len, tokenizer.get_vocab()))


def model_longest_token(model_name: str) -> int:
    """`longest_token` of the served model's tokenizer: the one place the server looks the tokenizer up for this."""
    return longest_token(load_tokenizer(model_name))


class Prechecks:
    """The cheap checks of one call: its limits, and the longest token of the served model."""

    def __init__(self, limits: Limits, longest: int | None) -> None:
        self.limits, self.longest = limits, longest

    def text(self, name: str, chars: int, param: str | None) -> None:
        """Refuse `chars` characters of text counted against the token limit `name`."""
        limit = getattr(self.limits, name)
        if self.longest is None or chars <= limit * self.longest:
            return
        raise LimitExceeded(name, math.ceil(chars / self.longest), limit, param, estimate=(
            f"{chars:,} characters, and no token of this model covers more than {self.longest}"))

    def messages(self, messages: Sequence, param: str, name: str = "max_content_tokens") -> None:
        """A content: its messages' texts (and the blank lines joining them)."""
        self.text(name, sum(text_chars(m.content if isinstance(m, Message) else
                                       m.get("content") if isinstance(m, Mapping) else None) + 2
                            for m in messages), param)

    def queries(self, queries: Sequence[ScoringQuery], at: str = "scoring.queries") -> None:
        """Counts first (questions: queries x placeholder values; options per query), then each template,
        placeholder value and option in characters."""
        if not self.plainly_within(queries):
            self.each_query(queries, at)

    def plainly_within(self, queries: Sequence[ScoringQuery]) -> bool:
        """Whether `queries` have no placeholders and pass every check of `each_query`: the usual body, told in a
        few passes in C without a JSON path built (56 queries: ~25 us, against ~100 one by one). When not,
        `each_query` finds the first check that fails, in its order, or passes them all (placeholders)."""
        if any(query.placeholders for query in queries):
            return False
        limits, longest = self.limits, self.longest
        options = [query.options or () for query in queries]
        answers = max((len(query.options or _listed(query.codes)) for query in queries), default=0)
        if len(queries) > limits.max_prompts_per_input or answers > limits.max_options:
            return False
        if longest is None:  # no character bound
            return True
        return (max((len(query.template) for query in queries), default=0)
                <= limits.max_query_tokens * longest
                and max(map(len, chain.from_iterable(options)), default=0) <= limits.max_option_tokens * longest)

    def each_query(self, queries: Sequence[ScoringQuery], at: str) -> None:
        """`queries`' checks one by one, in order: the first that fails raises, naming where."""
        questions = sum(math.prod(len(v) for v in (q.placeholders or {}).values()) for q in queries)
        self.limits.check("max_prompts_per_input", questions, at)
        for k, query in enumerate(queries):  # a decision model's listed codes count as its options
            field = "options" if query.options or not _listed(query.codes) else "codes"
            self.limits.check("max_options", len(query.options or _listed(query.codes)), f"{at}[{k}].{field}")
        for k, query in enumerate(queries):
            where = f"{at}[{k}]"
            self.text("max_query_tokens", len(query.template), f"{where}.template")
            for name, values in (query.placeholders or {}).items():
                self.longest_of("max_query_tokens", values, f"{where}.placeholders.{name}")
            self.longest_of("max_option_tokens", query.options or [], f"{where}.options")

    def longest_of(self, name: str, texts: Sequence[str], param: str) -> None:
        """`text` for the longest of `texts` (param `param[j]`): one pass in C, however many there are."""
        if texts:
            chars = max(map(len, texts))
            self.text(name, chars, f"{param}[{next(j for j, t in enumerate(texts) if len(t) == chars)}]")

    def score_request(self, request: ScoreRequest) -> None:
        """A /v1/score request (also chat's scoring mode), as decoded: contents, then queries."""
        if request.messages is not None:
            self.messages(request.messages, "messages")
        for i, item in enumerate(request.inputs or []):
            self.messages(item.messages, f"inputs[{i}].messages")
        self.queries(request.scoring.queries if request.scoring is not None else [])

    def pieces(self, pieces: Iterable[tuple[str, str]]) -> None:
        """Texts each under max_query_tokens: (JSON path, text), e.g. the parts of a decision question."""
        for param, text in pieces:
            self.text("max_query_tokens", len(text), param)


def text_chars(content) -> int:
    """Characters of a message's content: a string, or text parts (joined with blank lines), decoded
    (`ContentPart`) or plain (a dict)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len((part.text if isinstance(part, ContentPart) else
                        part.get("text") if isinstance(part, Mapping) else None) or "") + 2 for part in content
                   if isinstance(part, (ContentPart, Mapping)))
    return 0


def _listed(codes) -> list:
    """A query's codes when it lists them (`"all"` lists none: the model's own, at most 255)."""
    return codes if isinstance(codes, list) else []
