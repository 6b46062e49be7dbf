"""The request limits (spinfc.config.Limits), checked on the tokenized, deduplicated program before it is
packed or laid out: each limit over which a request goes is a 400 whose code names it (`<limit>_exceeded`) and
whose param points at what was counted. `max_body_bytes` is Litestar's body limit (server/errors.py maps its 413);
`max_extractions_per_input` and `max_prompts_per_input` are also counted on the frontend's program, before the
engine expands its grids."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import attrs

from spinfc.config import Limits
from spinfc.ir.nodes import GenerateSlot, OptionSlot, Program
from spinfc.passes.dedupe_prefixes import trie_size
from spinfc.passes.expand_placeholders import grid_size
from spinfc.runtime.extract.budget import decode_tokens


def check_limits(program: Program, limits: Limits, many_inputs: bool, where: Mapping[str, str] | None = None,
                 options_field: str = "options", skip: Collection[str] = (), content_field: str = "messages") -> None:
    """Raise `LimitExceeded` for the first limit `program` goes over. `many_inputs`: the request sent `inputs`
    (params read `inputs[i].messages`) rather than `messages` (or `content_field`); `where` maps a query id to
    the JSON path it came from (default `scoring.queries[i]`, in program order); `skip` names limits the caller
    checks itself."""
    where = where or {query.id: f"scoring.queries[{k}]" for k, query in enumerate(program.queries)}
    inputs = [content for content in program.contents if not content.is_floor]
    for i, content in enumerate(inputs):
        where_content = f"inputs[{i}].messages" if many_inputs else content_field
        limits.check("max_content_tokens", len(content.tokens), where_content)
    if "max_prompts_per_input" not in skip:
        limits.check("max_prompts_per_input", len(program.questions), "scoring.queries")
    for question in program.questions:
        at = where[question.query_id]
        if "max_query_tokens" not in skip:
            limits.check("max_query_tokens", len(question.tokens), f"{at}.template")
        if isinstance(question.slot, OptionSlot):
            limits.check("max_options", len(question.slot.options), f"{at}.{options_field}")
            for j, option in enumerate(question.slot.options):
                limits.check("max_option_tokens", len(option.tokens), f"{at}.{options_field}[{j}]")
    limits.check("max_processed_tokens", processed_tokens(program))


def limits_that_hold(limits: Limits, largest: int) -> Limits:
    """`limits` with `max_content_tokens` lowered where a content at it, with one question of `max_query_tokens` and
    an option of `max_option_tokens`, would not fit the largest pass (`Shapes.largest`): so the limit /v1/models
    reports is one a content can meet. The defaults hold on every device at its default budget (on the CPU a
    content alone may take a pass of 16,384 rows); a CUDA budget set below the content limit lowers it."""
    most = largest - limits.max_query_tokens - limits.max_option_tokens
    if limits.max_content_tokens <= most:
        return limits
    return attrs.evolve(limits, max_content_tokens=max(1, most))


def processed_tokens(program: Program) -> int:
    """Tokens the program puts into passes: each content (the floor included) once, plus the question tree under it."""
    tree = program.stat("tree_tokens", -1)  # dedupe-prefixes counted it (kept with the memoised trie)
    tree = trie_size(program.trie) if tree < 0 else tree
    return sum(len(content.tokens) + tree for content in program.contents)


def check_extractions(program: Program, limits: Limits, where: Mapping[str, str] | None = None) -> None:
    """`max_extractions_per_input`: the extraction questions (`<*>` `<n>` `<$>` `<gen>` slots, placeholder
    combinations counted one by one) asked of each input, counted on the frontend's program (before expansion);
    `max_beam_width` and `max_slot_tokens` on each extraction query's `beam_width` and `max_tokens`;
    `max_decode_tokens` on the whole request (`decode_tokens` of every slot, of every input)."""
    where = where or {query.id: f"scoring.queries[{k}]" for k, query in enumerate(program.queries)}
    count, last, decoded = 0, None, 0
    for query in program.queries:
        if not isinstance(query.slot, OptionSlot):
            count, last = count + grid_size(query), where[query.id]
            decoded += grid_size(query) * decode_tokens(query.slot)
            at = where[query.id]
            field = (lambda name: at) if at.startswith("packs[") else (lambda name: f"{at}.{name}")  # noqa: E731
            if not isinstance(query.slot, GenerateSlot):
                limits.check("max_beam_width", query.slot.beam_width, field("beam_width"))
            limits.check("max_slot_tokens", query.slot.max_tokens, field("max_tokens"))
    if last is not None:
        limits.check("max_extractions_per_input", count, f"{last}.template")
        inputs = sum(not content.is_floor for content in program.contents)
        limits.check("max_decode_tokens", decoded * inputs, "scoring.queries")



def check_prompts(program: Program, limits: Limits) -> None:
    """`max_prompts_per_input`, counted on the frontend's program (packs' queries included) before the grids are
    expanded: a few hundred bytes of placeholder values can ask for millions of questions, and the compile thread
    that every request shares must not build them only to refuse them afterwards."""
    limits.check("max_prompts_per_input", sum(grid_size(query) for query in program.queries), "scoring.queries")
