"""A pass holding a content read from the content cache beside a content with an image (random-weight Gemma 3 and
Gemma 4 with their towers, on the CPU): the image content is computed (media are never cached), so its tower
embeddings, its image blocks' both-ways attention and its scores are what it gets with the cache off, and the cached
text content's are what it gets read anew (runtime/launch/cached_rows.py)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from spinfc.backend.launch import Launch, MediaRows
from spinfc.media import MediaPolicy
from spinfc.runtime.engine import Engine
from spinfc.runtime.launch.cached_rows import reading
from spinfc.runtime.launch.content_cache import CachedContent
from spinfc.runtime.load.loader import load_model
from spinfc.runtime.towers import MediaReader
from spinfc.shapes import Shapes
from tests.rounding import assert_same_across_launches

from .snapshots import data_url, gemma3_snapshot, gemma4_snapshot, png

TEXT = "The river rose over the bank and the town court moved its records to the hill. " * 2
OTHER_TEXT = "Shares of the bank fell after the strike, and the record profit was lost to the rain. " * 3
QUERY = {"queries": [{"id": "shown", "template": "\nIs it red? Answer:<?>", "options": [" yes", " no", " maybe"]}]}


@pytest.fixture(scope="module", params=["gemma3", "gemma4"])
def model(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(f"{request.param}-cached-media")
    (gemma3_snapshot if request.param == "gemma3" else gemma4_snapshot)(directory)
    return load_model(str(directory))


def image_content(seed: int) -> dict:
    url = data_url(png(40, 28, seed))
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look:"},
                                                      {"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": "What is it?"}]}]}


def text_content(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def engine_of(model, **kwargs) -> Engine:
    media = MediaReader(model.towers, MediaPolicy(), model.tokenizer)
    return Engine(model, Shapes.for_device("cpu", 1024, block=64), media=media, **kwargs).start()


def logprobs(engine: Engine, inputs: list[dict]) -> list[list[float]]:
    """Per content, its options' logprobs."""
    results = asyncio.run(engine.score(engine.compile({"inputs": inputs, "scoring": QUERY}))).results()
    return [[o.logprob for query in per_content for c in query.combinations for o in c.options]
            for per_content in results]


# the pass's contents in order: the cached text, the image content, and a text read anew
ORDERS = {"cached-image": ("cached", "image"), "image-cached": ("image", "cached"),
          "cached-image-new": ("cached", "image", "new")}


@pytest.mark.parametrize("order", list(ORDERS))
def test_an_image_content_beside_a_cached_content_scores_as_alone(model, seed, order) -> None:
    contents = {"cached": text_content(TEXT), "image": image_content(seed % 1000), "new": text_content(OTHER_TEXT)}
    names = ORDERS[order]
    plain = engine_of(model, content_cache_tokens=0)
    try:
        alone = {name: logprobs(plain, [contents[name]])[0] for name in names}
    finally:
        plain.close()
    engine = engine_of(model)
    try:
        logprobs(engine, [contents["cached"]])  # read anew, kept
        stats, passes = engine.contents.cache.stats, engine.stats.passes
        assert (stats.hits, len(engine.contents.cache)) == (0, 1)
        got = dict(zip(names, logprobs(engine, [contents[name] for name in names])))
        # one pass holds them all (a failed pass is retried a content at a time, which would hit twice)
        assert (stats.hits, engine.stats.passes) == (1, passes + 1)
    finally:
        engine.close()
    differences = {name: max(abs(a - b) for a, b in zip(got[name], alone[name])) for name in names}
    print(f"{model.family} {order}: max |logprob - alone, cache off| "
          + ", ".join(f"{name} {d:.2e}" for name, d in differences.items()))
    assert all(len(got[name]) == len(alone[name]) == 3 for name in names)
    assert_same_across_launches(got, alone, model.device)  # the computed rows run in a smaller launch


def test_the_computed_rows_launch_holds_their_media_fields() -> None:
    """`reading` of a hand-made pass of 40 rows, a cached content at rows 0..19, then a content whose image block is
    rows 24..27 with M-RoPE positions (as Qwen3.5's, whose engine keeps no cache: the launch is the contract): the
    computed rows' launch places the image at its own rows 4..7 and holds those rows' `firsts` and positions."""
    T = 40
    firsts = torch.arange(T, dtype=torch.int32)
    firsts[24:28] = 24
    rope = torch.arange(T).repeat(3, 1)  # [3, T]
    rope[:, 24:28] = torch.tensor([[24] * 4, [24, 24, 25, 25], [24, 25, 24, 25]])
    launch = Launch(tokens=torch.arange(T) + 100, positions=torch.arange(T),
                    ends=torch.full((T,), T, dtype=torch.int32), spans=((0, 20), (20, T)), rows=torch.tensor([39]),
                    read_row=torch.tensor([0]), read_token=torch.tensor([1]),
                    media=MediaRows(torch.arange(24, 28), ()), firsts=firsts, rope_positions=rope)
    entry = CachedContent(20, (torch.zeros(20, 1, 2),), (torch.zeros(20, 1, 2),))
    cached = reading(launch, [0, 20], [entry, None]).cached
    inner = cached.inner
    assert inner.media.rows.tolist() == [4, 5, 6, 7]
    assert torch.equal(inner.tokens[inner.media.rows], launch.tokens[launch.media.rows])
    assert torch.equal(inner.rope_positions, rope[:, 20:]) and torch.equal(inner.firsts, firsts[20:])
    assert cached.layout.firsts is firsts and cached.layout.media is launch.media  # what the attention reads
    with pytest.raises(ValueError, match="never cached"):  # an image in a cached content: refused, not misplaced
        reading(launch, [0, 20], [None, CachedContent(20, entry.keys, entry.values)])
