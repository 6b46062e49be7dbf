"""The extraction grammars kept per tokenizer are bounded (issue 38, item 8): a template's text picks a text slot's
terminator, so a stream of requests could ask for any number of compiled grammars and terminator tables."""

from __future__ import annotations

from spinfc.registry import load_tokenizer
from spinfc.runtime.admit.chat_format import end_tokens
from spinfc.runtime.extract import grammars
from spinfc.runtime.extract.grammars import Grammars, slot_regex


def test_compiled_grammars_and_terminator_tables_keep_the_ones_used_last(monkeypatch) -> None:
    monkeypatch.setattr(grammars, "GRAMMARS_REMEMBERED", 2)
    tokenizer = load_tokenizer("smollm2-135m")
    kept = Grammars(tokenizer, len(tokenizer), end_tokens(tokenizer))
    for end in ['"', "'", ")"]:
        assert kept.matcher(slot_regex("text", end)).accept_string("x" + end)
        kept.ending_tokens(tokenizer, end)
    assert list(kept._compiled) == [slot_regex("text", "'"), slot_regex("text", ")")]
    assert list(kept._endings) == ["'", ")"]
    kept.matcher(slot_regex("text", "'"))  # used again: now the last to go
    kept.matcher(slot_regex("text", '"'))
    assert list(kept._compiled) == [slot_regex("text", "'"), slot_regex("text", '"')]
