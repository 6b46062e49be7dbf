"""Result assembly: read logprobs -> option logprob, p, floor_p, residual, in the seed's shape."""

from __future__ import annotations

import math
import random
from pathlib import Path

import msgspec
import pytest

from spinfc.ir.nodes import (
    AnswerRead,
    Content,
    Option,
    OptionSlot,
    Program,
    Query,
    Question,
    SlotRef,
    SourceLoc,
    Template,
    Text,
)
from spinfc.runtime.deliver.results import content_scores, contents_results, query_results, residual, softmax
from spinfc.wire.results import Combination, OptionScore, QueryResult

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


# ---- the bytes of a response: the same for the same scores, however the results are assembled -------------------

GOLDEN = Path(__file__).with_name("results_golden.json")  # written by the per-content assembly (before 2026-12-01)
TEMPLATE = Template("Is {x} ok?<?>", (Text("Is "), SlotRef("options", LOC)), LOC)


def asked(*queries: tuple[str, tuple, tuple[str, ...]]) -> Program:
    """A program of option queries (id, placeholder values of each question, option texts), two contents and a
    floor."""
    built, questions = [], []
    for query_id, grid, texts in queries:
        slot = OptionSlot(tuple(Option(t, (5 + k,)) for k, t in enumerate(texts)))
        placeholders = (("x", tuple(value for ((_, value),) in grid)),) if grid != ((),) else ()
        built.append(Query(query_id, TEMPLATE, slot, placeholders))
        questions += [Question(query_id, values, "prompt", slot, (1, 2)) for values in grid]
    contents = (Content("c0", "text"), Content("c1", "more"), Content("floor", "", is_floor=True))
    return Program("test", contents, tuple(built), tuple(questions))


def one_by_one(program: Program, scores, floor) -> list[QueryResult]:
    """The definition the response's numbers keep: each combination on its own, with `softmax` and `residual`."""
    by_query: dict[str, list[Combination]] = {query.id: [] for query in program.queries}
    for qi, q in enumerate(program.questions):
        p, floor_p = softmax(scores[qi]), softmax(floor[qi])
        by_query[q.query_id].append(Combination(values=dict(q.values), residual=residual(scores[qi]), options=[
            OptionScore(text=o.text, logprob=scores[qi][k], p=p[k], floor_p=floor_p[k])
            for k, o in enumerate(q.slot.options)]))
    return [QueryResult(id=query_id, combinations=combinations) for query_id, combinations in by_query.items()]


GOLDEN_PROGRAM = asked(("q", ((("x", "a"),), (("x", "b"),)), (" yes", " no")),
                       ("r", ((),), (" red", " green", " blue")), ("s", ((),), (" yes", " no")))
GOLDEN_CONTENTS = [  # awkward floats: ties, a signed zero, exp's range left below, options that sum past 1
    ((math.log(0.6), math.log(0.2)), (-0.0, 0.0), (-1.25, -3.5, -1.25), (-2000.0, -2001.0)),
    ((-0.1, -0.2), (-745.5, -1e-300), (-0.7, -0.7, -0.7), (-1e-17, -37.0)),
]
GOLDEN_FLOOR = ((-0.5, -0.9), (-0.3, -1.9), (-1.0, -2.0, -3.0), (-0.69, -0.7))


def test_results_encode_to_the_recorded_bytes() -> None:
    """The JSON of a program's results on fixed scores is byte for byte what the per-content assembly wrote: a
    faster assembly (or a schema change) that moves one bit of one float, or one key, fails here."""
    encoded = msgspec.json.encode(contents_results(GOLDEN_PROGRAM, GOLDEN_CONTENTS, GOLDEN_FLOOR))
    assert encoded == GOLDEN.read_bytes()
    assert msgspec.json.encode([query_results(GOLDEN_PROGRAM, c, GOLDEN_FLOOR) for c in GOLDEN_CONTENTS]) == encoded


@pytest.mark.parametrize("options", [1, 2, 3, 5])
def test_many_contents_give_the_bytes_of_one_by_one(options: int) -> None:
    """Random scores (ties and far-apart values included) on many contents: the same bytes as assembling each
    combination on its own."""
    rng = random.Random(options)
    texts = tuple(f" o{k}" for k in range(options))
    program = asked(("a", ((("x", "1"),), (("x", "2"),), (("x", "3"),)), texts), ("b", ((),), texts))

    def row() -> tuple[float, ...]:
        pick = rng.random()
        if pick < 0.2:  # every option tied
            return (-rng.expovariate(1.0),) * options
        if pick < 0.3:  # beyond exp's range
            return tuple(-rng.uniform(700, 2000) for _ in range(options))
        return tuple(-rng.expovariate(rng.choice((0.1, 1.0, 10.0))) for _ in range(options))

    contents = [tuple(row() for _ in program.questions) for _ in range(40)]
    floor = tuple(row() for _ in program.questions)
    expected = [one_by_one(program, scores, floor) for scores in contents]
    assert msgspec.json.encode(contents_results(program, contents, floor)) == msgspec.json.encode(expected)
