"""A content's decode finds its floor whatever pass the floor ran in (issue 38): nine contents of one request with a
searched slot, over three 512-token passes, once failed with "question 0 has no floor context", because a floor's
prompt contexts were delivered only when its pass's decode ended, after a later pass's contents had started theirs.
The floor is now delivered with its pass (`scheduling.floor_scores`). A random llama of SmolLM2's tokenizer: the
answers are noise (a `<n>` slot's beams find some at once), but the same noise alone or packed (the same texts, the
logprobs within the CPU's rounding: a pass of another row count sums in another order)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from spinfc.runtime.engine import Engine
from spinfc.shapes import Shapes
from tests.rounding import assert_same_across_launches
from tests.runtime.tiny_llama import tiny_llama

CONTENTS = ["The repair cost $30 and took two days.", "It cost US$30 in the end.", "The fee is USD 45.",
            "The ticket was €1,250.", "Price: EUR 1.250,00 incl. VAT.", "The sandwich was £7.50.",
            "Price: ¥300 per bowl.", "The fee is 30 USD.", "We paid 1,250 euros."]
QUERY = {"id": "days", "template": "\n\nQ: How many days?\nA: <n>"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from spinfc.runtime.load.loader import load_model

    folder = tiny_llama(tmp_path_factory.mktemp("tiny"))
    return load_model(str(folder), dtype=torch.float32, device="cpu")


def answers(model, contents: list[str]) -> tuple[list, set]:
    """Each content's answers (text, logprob, floor_logprob) from one request, and the passes it ran in."""
    body = {"inputs": [{"messages": [{"role": "user", "content": c}]} for c in contents],
            "scoring": {"queries": [QUERY]}}

    async def go():
        engine = Engine(model, Shapes.for_device("cpu", 512)).start()
        try:
            scored = await engine.score(engine.compile(body))
            return ([[(a.text, a.logprob, a.floor_logprob) for a in scored.scores[c][0].answers]
                     for c in scored.compiled.inputs], {placed[0] for placed in scored.placements})
        finally:
            engine.close()

    return asyncio.run(go())


def test_contents_in_later_passes_read_their_floor(model) -> None:
    packed, passes = answers(model, CONTENTS)
    assert len(passes) >= 2
    for k in (0, len(CONTENTS) - 1):  # the first pass's and the last's: as alone, its floor in its own pass
        assert packed[k]
        assert_same_across_launches(packed[k], answers(model, CONTENTS[k:k + 1])[0][0], model.device)
