"""Result assembly: read logprobs -> option logprob, p, floor_p, residual, in the seed's shape."""

from __future__ import annotations

import math

import pytest

from spinfc.ir.nodes import AnswerRead, Content, Option, OptionSlot, Program, Query, Question, SlotRef, SourceLoc
from spinfc.ir.nodes import Template, Text
from spinfc.runtime.results import content_scores, query_results, residual, softmax

LOC = SourceLoc("<test>")


def question(query_id: str, values: tuple, options: list[tuple[str, tuple[int, ...]]]) -> Question:
    slot = OptionSlot(tuple(Option(text, tokens) for text, tokens in options))
    return Question(query_id, values, "prompt", slot, (1, 2))


def read(q: int, o: int, step: int) -> AnswerRead:
    return AnswerRead(row=10 + step, content=0, question=q, option=o, step=step, token=100 + o)


def test_content_scores_sum_each_options_tokens() -> None:
    questions = [question("a", (), [(" yes", (5,)), (" no way", (6, 7))])]
    reads = [read(0, 1, 1), read(0, 0, 0), read(0, 1, 0)]
    assert content_scores(questions, reads, [-0.5, -0.25, -1.0]) == ((-0.25, -1.5),)


def test_content_scores_refuse_a_missing_or_repeated_step() -> None:
    questions = [question("a", (), [(" yes", (5,)), (" no way", (6, 7))])]
    with pytest.raises(ValueError, match="' no way': read steps \\[0\\], expected 0..1"):
        content_scores(questions, [read(0, 0, 0), read(0, 1, 0)], [-1.0, -1.0])
    with pytest.raises(ValueError, match="read twice"):
        content_scores(questions, [read(0, 0, 0), read(0, 0, 0)], [-1.0, -1.0])


def test_softmax_and_residual() -> None:
    p = softmax([math.log(0.3), math.log(0.1)])
    assert p == pytest.approx([0.75, 0.25], abs=1e-12)
    assert softmax([-2000.0, -2001.0]) == pytest.approx([1 / (1 + math.exp(-1)), 1 - 1 / (1 + math.exp(-1))])
    assert residual([math.log(0.3), math.log(0.1)]) == pytest.approx(0.6)
    assert residual([math.log(0.8), math.log(0.7)]) == 0.0  # options that extend one another: clamped


def test_query_results_follow_the_seed_shape_per_combination() -> None:
    template = Template("Is {x} ok?<?>", (Text("Is "), SlotRef("options", LOC)), LOC)
    opts = [(" yes", (5,)), (" no", (6,))]
    slot = OptionSlot(tuple(Option(t, k) for t, k in opts))
    program = Program(
        "test", (Content("c0", "text"), Content("floor", "", is_floor=True)),
        (Query("q", template, slot, (("x", ("a", "b")),)), Query("r", template, slot)),
        (question("q", (("x", "a"),), opts), question("q", (("x", "b"),), opts), question("r", (), opts)),
    )
    scores = ((math.log(0.6), math.log(0.2)), (math.log(0.1), math.log(0.1)), (math.log(0.5), math.log(0.5)))
    floor = ((math.log(0.5), math.log(0.5)),) * 3
    results = query_results(program, scores, floor)
    assert [r.id for r in results] == ["q", "r"]
    assert [c.values for c in results[0].combinations] == [{"x": "a"}, {"x": "b"}]
    first = results[0].combinations[0]
    assert [o.text for o in first.options] == [" yes", " no"]
    assert [o.p for o in first.options] == pytest.approx([0.75, 0.25])
    assert [o.floor_p for o in first.options] == pytest.approx([0.5, 0.5])
    assert first.options[0].logprob == pytest.approx(math.log(0.6))
    assert first.residual == pytest.approx(0.2)
    assert results[1].combinations[0].residual == pytest.approx(0.0, abs=1e-12)
