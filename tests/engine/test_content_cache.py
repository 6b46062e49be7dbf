"""The content cache on small random-weight models (Llama, and Gemma 3 with a window that cached rows cross): a
content's scores and extraction answers are the same read anew or from the cache, the cache never holds more than
its budget, and its entries are one model's."""

from __future__ import annotations

import asyncio
import random

import pytest
import torch

from spinfc.registry import load_tokenizer
from spinfc.runtime.engine import Engine
from spinfc.runtime.launch.content_cache import CachedContent, ContentCache
from spinfc.runtime.load.loader import load_model
from spinfc.shapes import Shapes
from tests.rounding import assert_same_across_launches

SHAPE = dict(vocab_size=49152, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=1024)
WORDS = ("rates", "bank", "rain", "river", "court", "shares", "strike", "flooded", "record", "profit", "town")
OPTIONS = {"id": "topic", "template": "\n\nIs it about the weather?\nAnswer:<?>", "options": [" yes", " no", " maybe"]}
OTHER = {"id": "money", "template": "\n\nIs it about money?\nAnswer:<?>", "options": [" yes", " no"]}
EXTRACT = ({"id": "thing", "template": "\n\nOne thing it names:<gen>", "max_tokens": 4},
           {"id": "count", "template": "\n\nHow many:<n>", "max_tokens": 3})


def _config(family: str):
    from transformers import Gemma3TextConfig, LlamaConfig

    if family == "llama":
        return LlamaConfig(**SHAPE, tie_word_embeddings=True, rope_theta=500.0)
    # a window of 8 positions: a question row sees only the last cached rows of a longer content
    return Gemma3TextConfig(**SHAPE, sliding_window=8, query_pre_attn_scalar=24, rope_local_base_freq=300.0,
                            layer_types=["sliding_attention", "full_attention", "sliding_attention"])


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def model(request, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    directory = tmp_path_factory.mktemp(request.param)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(_config(request.param), dtype=torch.float32).save_pretrained(directory)
    load_tokenizer("smollm2-135m").save_pretrained(directory)
    return load_model(str(directory))


def body(texts, queries) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in texts],
            "scoring": {"queries": list(queries)}}


def score(engine: Engine, request: dict):
    return asyncio.run(engine.score(engine.compile(request))).results()


def numbers(results) -> list[tuple[list[float], list[str]]]:
    """Per content, every logprob of its results (options, answers, generated text) and every answer text."""
    out = []
    for per_content in results:
        logprobs, texts = [], []
        for query in per_content:
            for combination in query.combinations:
                logprobs += [o.logprob for o in combination.options or ()]
                logprobs += [a.logprob for a in combination.answers or ()]
                texts += [a.text for a in combination.answers or ()]
                if combination.text is not None:
                    logprobs.append(combination.logprob)
                    texts.append(combination.text)
        out.append((logprobs, texts))
    return out


def contents(rng: random.Random, count: int, words: tuple[int, int] = (20, 90)) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(*words))) for _ in range(count)]


def test_scores_are_the_same_read_anew_or_from_the_cache(model, seed) -> None:
    rng = random.Random(seed)
    texts = contents(rng, 3)
    second = (OPTIONS, *EXTRACT)  # a second round of questions on the same contents, extraction included
    shapes = Shapes.for_device("cpu", 1024)
    plain = Engine(model, shapes, content_cache_tokens=0).start()
    try:
        want = numbers(score(plain, body(texts, second)))
        assert plain.contents.cache.stats.misses == 0  # off: never looked up
    finally:
        plain.close()
    cached = Engine(model, shapes).start()
    try:
        score(cached, body(texts, [OTHER]))  # reads the contents, keeps them
        stats = cached.contents.cache.stats
        assert (stats.hits, stats.misses, len(cached.contents.cache)) == (0, 3, 3)
        got = numbers(score(cached, body(texts[::-1], second)))  # in another order: other passes, other rows
        assert stats.hits == 3
    finally:
        cached.close()
    got = got[::-1]  # the contents were sent reversed
    assert [texts for _, texts in got] == [texts for _, texts in want]
    assert [len(lps) for lps, _ in got] == [len(lps) for lps, _ in want]
    difference = max(abs(a - b) for (x, _), (y, _) in zip(want, got) for a, b in zip(x, y))
    print(f"{model.family}: max |logprob read anew - from the cache| = {difference:.2e}")
    assert_same_across_launches(got, want, model.device)  # a computed row's matmuls run over fewer rows


def test_the_engine_keeps_no_more_than_its_budget(model, seed) -> None:
    rng = random.Random(seed)
    texts = contents(rng, 6, words=(60, 90))  # more than the budget together (a seed drew 197 tokens), each within it
    engine = Engine(model, Shapes.for_device("cpu", 1024), content_cache_tokens=200).start()
    try:
        for text in texts:
            score(engine, body([text], [OTHER]))
            assert engine.contents.cache.stats.tokens <= 200
        stats = engine.contents.cache.stats
        assert stats.misses == 6 and stats.stored >= 2 and stats.evictions >= 1
        score(engine, body([texts[-1]], [OPTIONS]))  # the last one read is still there
        assert stats.hits == 1
    finally:
        engine.close()
    assert len(engine.contents.cache) == 0 and engine.contents.cache.stats.tokens == 0  # dropped with its engine


def _entry(tokens: int) -> CachedContent:
    return CachedContent(tokens, (torch.zeros(tokens, 1, 2),), (torch.zeros(tokens, 1, 2),))


def test_the_cache_is_least_recently_used_under_its_budget(seed) -> None:
    rng = random.Random(seed)
    cache = ContentCache("weights:float32", 500)
    held: dict[str, int] = {}
    for step in range(300):
        key = f"c{rng.randrange(40)}"
        if rng.random() < 0.5 and cache.get(key) is not None:
            continue
        size = rng.randrange(1, 700)
        kept = cache.put(key, _entry(size))
        assert kept == (size <= 500)
        assert cache.stats.tokens <= 500
        assert cache.stats.tokens == sum(e.tokens for e in cache._entries.values())
        held[key] = size
    cache.put("old", _entry(100))
    cache.put("new", _entry(100))
    cache.get("old")  # now the most recent: "new" goes first
    cache.put("big", _entry(400))
    assert "old" in cache and "new" not in cache and "big" in cache


def test_entries_are_one_models() -> None:
    tokens = torch.arange(40).numpy()
    a, b, c = ContentCache("hash-a:float32", 100), ContentCache("hash-b:float32", 100), ContentCache("hash-a:bf16", 100)
    assert len({a.key(tokens), b.key(tokens), c.key(tokens)}) == 3
    assert a.key(tokens) == ContentCache("hash-a:float32", 5).key(tokens)
    assert a.key(tokens) != a.key(tokens[1:])


def test_metrics_show_the_cache() -> None:
    from spinfc.metrics import Metrics

    cache, metrics = ContentCache("hash:float32", 1000), Metrics()
    metrics.watch_content_cache(cache)
    cache.get("absent")
    cache.put("a", _entry(600))
    cache.put("b", _entry(600))
    cache.get("b")
    text = metrics.render().decode()
    for line in ("spinfc_content_cache_hits_total 1.0", "spinfc_content_cache_misses_total 1.0",
                 "spinfc_content_cache_evictions_total 1.0", "spinfc_content_cache_tokens 600.0",
                 "spinfc_content_cache_budget_tokens 1000.0"):
        assert line in text, line


class Recording:
    """What a CUDA server's GraphedModel is to the engine, with graphs off, on the CPU: `forward`, and
    `forward_recording` through each launch shape's `GraphedPass` (its static inputs loaded, then the recording
    forward its graph captures on CUDA, `kv_record.recording`, writing every layer's keys and values into the
    static `KVBuffers`)."""

    records = True

    def __init__(self, model, rows: int):
        from spinfc.backend.kv_record import KVBuffers

        self.model = model
        self.kv = KVBuffers.for_model(model, _padding(rows), rows)
        self.passes: dict = {}

    def forward(self, launch):
        return self.model.forward(launch)

    def forward_recording(self, launch):
        from spinfc.backend.graphs import GraphedPass, LaunchShape
        from spinfc.backend.kv_record import recording

        shape = LaunchShape.of(launch)
        keys, values = self.kv.views(shape.budget)
        graphed = self.passes.get(shape)
        if graphed is None:
            graphed = self.passes[shape] = GraphedPass(self.model.forward, shape, torch.device("cpu"), False)
            graphed.record = lambda static: recording(self.model, static, keys, values)
        return graphed.recorded(launch), keys, values

    def __getattr__(self, name):
        return getattr(self.model, name)


def _padding(rows: int):
    from spinfc.backend.launch import Launch

    return Launch(tokens=torch.zeros(rows, dtype=torch.int64), positions=torch.zeros(rows, dtype=torch.int64),
                  ends=torch.arange(1, rows + 1, dtype=torch.int32), spans=((0, rows),),
                  rows=torch.zeros(1, dtype=torch.int64), read_row=torch.zeros(1, dtype=torch.int64),
                  read_token=torch.zeros(1, dtype=torch.int64))


def test_a_recording_pass_fills_the_cache_with_the_eager_passs_bits(model, seed) -> None:
    """The pass a CUDA server replays to fill the cache (`GraphedPass.recorded`, here with graphs off):
    the entries it leaves are bit for bit those the eager fill leaves, its own scores are the plain forward's, and
    a content read from them scores as it does read anew."""
    rng = random.Random(seed)
    texts = contents(rng, 3)
    shapes = Shapes.for_device("cpu", 1024)
    entries = {}
    for name, engine_model in (("eager", model), ("recording", Recording(model, 1024))):
        engine = Engine(engine_model, shapes, content_cache_tokens=100_000).start()
        try:
            first = numbers(score(engine, body(texts, [OTHER])))
            again = numbers(score(engine, body(texts, [OPTIONS])))
            assert engine.contents.cache.stats.hits == 3
            entries[name] = (first, again, dict(engine.contents.cache._entries))
            assert name == "eager" or engine_model.passes  # the filling passes went through GraphedPass.recorded
        finally:
            engine.close()
    assert entries["recording"][0] == entries["eager"][0] and entries["recording"][1] == entries["eager"][1]
    eager, recorded = entries["eager"][2], entries["recording"][2]
    assert eager.keys() == recorded.keys() and len(eager) == 3
    for key in eager:
        assert all(torch.equal(a, b) for a, b in zip(eager[key].keys + eager[key].values,
                                                     recorded[key].keys + recorded[key].values))
    plain = Engine(model, shapes, content_cache_tokens=0).start()
    try:
        fresh = numbers(score(plain, body(texts, [OPTIONS])))
    finally:
        plain.close()
    assert_same_across_launches(entries["recording"][1], fresh, model.device)


def test_cuda_keeps_the_cache_off_where_no_graph_records(model) -> None:
    """On CUDA the default budget comes from free device memory only where the filling passes replay graphs; on the
    CPU it is what fits a tenth of the memory, as before."""
    from spinfc.runtime.launch.content_cache import default_tokens

    assert default_tokens(model, "cuda:0", records=False) == 0
    assert default_tokens(model, "cpu") > 0
