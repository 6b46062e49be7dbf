"""What the compile keeps between requests (a query set read once, its questions expanded and tokenized once, its
trie built once): a request compiles to the same program with a context that has seen others as with a fresh one,
in any order, and a mistake is reported every time it is sent."""

from __future__ import annotations

import pytest

from spinfc import compiler
from spinfc.errors import RequestError
from spinfc.frontend import program_from_request
from spinfc.passes import SCHEDULED_FROM, PassContext
from spinfc.registry import load_tokenizer
from spinfc.shapes import Shapes

MODEL = "smollm2-135m"
QUERIES = [{"id": "refund", "template": "\n\nDoes the customer ask for a refund?\nAnswer:<?>",
            "options": [" yes", " no"]},
           {"id": "tone", "template": "\n\nIs the tone {tone}?\nAnswer:<?>", "options": [" yes", " no", " unsure"],
            "placeholders": {"tone": ["angry", "calm"]}},
           {"id": "month", "template": '\n\nWhich month is named? Month: "<*>"'}]
OTHER = [{"id": "late", "template": "\n\nIs a delivery late?\nAnswer:<?>", "options": [" yes", " no"]}]
TEXTS = ["I was charged twice in September.", "My parcel never arrived, where is it?", "Thanks, all good."]


def body(text: str, queries: list[dict]) -> dict:
    return {"messages": [{"role": "user", "content": text}], "scoring": {"queries": queries}}


def compiled(request: dict, ctx: PassContext):
    return compiler.compile(program_from_request(request, model=MODEL), ctx, until=SCHEDULED_FROM)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MODEL)


def fresh(tokenizer) -> PassContext:
    return PassContext(tokenizer=tokenizer, shapes=Shapes(budget=4096, block=64))


@pytest.mark.parametrize("order", [(0, 1, 2, 3, 4, 5), (5, 4, 3, 2, 1, 0), (3, 0, 4, 1, 5, 2)])
def test_a_context_that_has_compiled_others_compiles_the_same_program(tokenizer, order) -> None:
    requests = [body(text, queries) for queries in (QUERIES, OTHER) for text in TEXTS]
    shared = fresh(tokenizer)
    for i in order:
        alone = compiled(requests[i], fresh(tokenizer))
        again = compiled(requests[i], shared)
        assert again.questions == alone.questions and again.trie == alone.trie
        assert again.segments == alone.segments and again.contents == alone.contents
        assert again.stats == alone.stats


def test_the_same_query_set_is_read_once_and_shared(tokenizer) -> None:
    a, b = (program_from_request(body(text, QUERIES), model=MODEL) for text in TEXTS[:2])
    assert a.queries == b.queries and a.queries is b.queries  # one read of the set, the same frozen values
    ctx = fresh(tokenizer)
    first, second = (compiled(body(text, QUERIES), ctx) for text in TEXTS[:2])
    assert first.questions is second.questions and first.trie is second.trie


def test_a_mistake_in_the_queries_is_reported_every_time(tokenizer) -> None:
    wrong = [QUERIES[0], QUERIES[0]]  # the body's schema allows it; reading the set refuses the second id
    for _ in range(2):
        with pytest.raises(RequestError) as raised:
            program_from_request(body(TEXTS[0], wrong), model=MODEL)
        assert (raised.value.code, raised.value.param) == ("duplicate_id", "scoring.queries[1].id")


def test_a_stream_of_different_query_sets_keeps_a_bounded_number(tokenizer) -> None:
    """Every kind of entry a set makes (its questions, their tokens, its trie, its tree rows) is bounded: a server
    whose every request asks its own questions kept every trie and tree it built (issue 38)."""
    from spinfc.passes.context import ENTRIES_PER_SET, SETS_REMEMBERED

    ctx = fresh(tokenizer)
    for i in range(2 * SETS_REMEMBERED + 3):
        query = {"id": "q", "template": f"\n\nQuestion {i}?\nAnswer:<?>", "options": [" yes", " no"]}
        compiled(body(TEXTS[0], [query]), ctx)
        kept = [key for key in [*ctx.memo, *ctx.memo.get("sets", ())] if isinstance(key, tuple)
                and key[0] in ("questions", "trie", "tree rows", "queries")]
        assert len(ctx.memo["sets"]) <= ENTRIES_PER_SET * SETS_REMEMBERED
        for kind in ("trie", "tree rows"):
            assert sum(key[0] == kind for key in kept) <= SETS_REMEMBERED, kind
    recent = {"id": "q", "template": f"\n\nQuestion {2 * SETS_REMEMBERED + 2}?\nAnswer:<?>", "options": [" yes", " no"]}
    assert compiled(body(TEXTS[1], [recent]), ctx).trie is compiled(body(TEXTS[2], [recent]), ctx).trie


def test_a_set_larger_than_the_bound_is_not_kept() -> None:
    from spinfc.passes.context import SET_QUESTIONS_REMEMBERED, recalled, remember

    memo: dict = {}
    remember(memo, ("questions", "small"), (1, 2, 3))
    remember(memo, ("questions", "large"), tuple(range(SET_QUESTIONS_REMEMBERED + 1)))
    assert recalled(memo, ("questions", "small")) == (1, 2, 3)
    assert recalled(memo, ("questions", "large")) is None


def test_the_texts_encodings_are_bounded_and_their_clearing_keeps_the_sets(tokenizer, monkeypatch) -> None:
    """The texts' encodings are dropped past MEMO_ENTRIES (a stream of new questions filled 56 MB at 100,000); the
    question sets' LRU stays, so a set asked again still compiles to the same trie."""
    import importlib

    tokenize = importlib.import_module("spinfc.passes.tokenize")  # the module (the package exports its function)
    monkeypatch.setattr(tokenize, "MEMO_ENTRIES", 8)
    ctx = fresh(tokenizer)
    kept = {"id": "q", "template": "\n\nQuestion kept?\nAnswer:<?>", "options": [" yes", " no"]}
    trie = compiled(body(TEXTS[0], [kept]), ctx).trie
    for i in range(20):
        query = {"id": "q", "template": f"\n\nQuestion {i}?\nAnswer:<?>", "options": [" yes", " no"]}
        compiled(body(TEXTS[0], [query]), ctx)
        assert len(ctx.memo) <= 8 + 4  # cleared past 8 texts, then one request's texts and the sets added
    assert compiled(body(TEXTS[1], [kept]), ctx).trie is trie
