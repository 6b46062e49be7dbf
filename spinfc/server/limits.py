"""The server's request limits (spinfc.config.Limits), checked on the tokenized, deduplicated program before it is
packed or laid out: each limit over which a request goes is a 400 whose code names it (`<limit>_exceeded`) and
whose param points at what was counted."""

from __future__ import annotations

from spinfc.config import Limits
from spinfc.ir.nodes import OptionSlot, Program
from spinfc.passes.dedupe_prefixes import trie_size


def check_limits(program: Program, limits: Limits, many_inputs: bool) -> None:
    """Raise `LimitExceeded` for the first limit `program` goes over. `many_inputs`: the request sent `inputs`
    (params read `inputs[i].messages`) rather than `messages`."""
    inputs = [content for content in program.contents if not content.is_floor]
    for i, content in enumerate(inputs):
        limits.check("max_content_tokens", len(content.tokens), f"inputs[{i}].messages" if many_inputs else "messages")
    limits.check("max_prompts_per_input", len(program.questions), "scoring.queries")
    index = {query.id: k for k, query in enumerate(program.queries)}
    for question in program.questions:
        where = f"scoring.queries[{index[question.query_id]}]"
        limits.check("max_query_tokens", len(question.tokens), f"{where}.template")
        if isinstance(question.slot, OptionSlot):
            limits.check("max_options", len(question.slot.options), f"{where}.options")
            for j, option in enumerate(question.slot.options):
                limits.check("max_option_tokens", len(option.tokens), f"{where}.options[{j}]")
    tree = trie_size(program.trie)
    processed = sum(len(content.tokens) + tree for content in program.contents)
    limits.check("max_processed_tokens", processed)
