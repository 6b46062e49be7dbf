"""A pass holding media as CUDA replays it (backend/graphs.py): the towers run first, their embeddings are placed at
their rows in a static buffer (`MediaInputs`), and the text stack reads them with `firsts` as inputs of the shape's
media graph. Here the same static-input path runs eagerly on the CPU (`GraphedPass` with capture off), through
the engine, on random-weight Gemma 3 and Gemma 4 (its per-layer inputs take the pad token at media rows): every
content's scores are what the towers-in-the-forward path gives."""

from __future__ import annotations

import asyncio

import pytest
import torch

from spinfc.backend.graphs import GraphedPass, LaunchShape, MediaInputs
from spinfc.media import MediaPolicy
from spinfc.runtime.engine import Engine
from spinfc.runtime.load.loader import load_model
from spinfc.runtime.towers import MediaReader
from spinfc.shapes import Shapes

from .snapshots import data_url, gemma3_snapshot, gemma4_snapshot, png

pytestmark = pytest.mark.slow  # two random-weight multimodal snapshots, loaded on the CPU

QUERY = {"queries": [{"id": "shown", "template": "\nIs it red? Answer:<?>", "options": [" yes", " no", " maybe"]}]}
SHAPES = Shapes.for_device("cpu", 1024, block=64)


class StaticMediaPasses:
    """What GraphedModel does with a pass holding media, without CUDA: each launch shape's static inputs filled
    (`MediaInputs.fill`) and the stack's forward run over them."""

    def __init__(self, model) -> None:
        self.model = model
        self.inputs = MediaInputs(model.towers.embed, SHAPES.largest, model.config.hidden,
                                  model.precision.residual, torch.device("cpu"))
        self.passes: dict = {}
        self.media_passes = 0

    def forward(self, launch):
        if launch.media is None:
            return self.model.forward(launch)
        shape = LaunchShape.of(launch)
        graphed = self.passes.get(shape)
        if graphed is None:
            graphed = self.passes[shape] = GraphedPass(self.model.forward, shape, torch.device("cpu"), False,
                                                       media=self.inputs)
        self.media_passes += 1
        return graphed(launch)

    def __getattr__(self, name):
        return getattr(self.model, name)


@pytest.fixture(scope="module", params=["gemma3", "gemma4"])
def model(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(f"{request.param}-static-media")
    (gemma3_snapshot if request.param == "gemma3" else gemma4_snapshot)(directory)
    return load_model(str(directory))


def image(seed: int) -> dict:
    part = {"type": "image_url", "image_url": {"url": data_url(png(40, 28, seed))}}
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look:"}, part,
                                                      {"type": "text", "text": "What is it?"}]}]}


def scores(stack, model) -> list:
    engine = Engine(stack, SHAPES, media=MediaReader(model.towers, MediaPolicy(), model.tokenizer),
                    content_cache_tokens=0).start()  # a pass that fills the cache runs the plain stack
    try:
        inputs = [image(0), {"messages": [{"role": "user", "content": "A plain text content."}]}, image(1)]
        results = asyncio.run(engine.score(engine.compile({"inputs": inputs, "scoring": QUERY}))).results()
    finally:
        engine.close()
    return [[o.logprob for query in per_content for c in query.combinations for o in c.options]
            for per_content in results]


def test_static_media_inputs_score_as_the_towers_in_the_forward(model):
    static = StaticMediaPasses(model)
    got, want = scores(static, model), scores(model, model)
    assert static.media_passes > 0  # the path under test ran
    assert got == want
    assert got[0] != got[2]  # the images are read
