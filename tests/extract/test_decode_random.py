"""The decode from a pass's keys and values, on small random-weight models of each family: an option read token by
token by decode steps (`Forced`, from the prompt row's visible rows of the pass) has the log-probability the tree
forward gives it; beams of several contents in one batch do not see one another; and it does not matter which
other beams share the batch. Gemma's window (6 positions) is crossed by the answers. Gemma 4's KV-shared layers
decode from the rows their source layers kept in the pass."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.extract.beams import Forced
from spinfc.runtime.extract.decode import Start, walk
from spinfc.runtime.extract.kv import KeyPool, forward_keeping_kv, gather_context, visible_rows
from tests.runtime.gemma4_shapes import GEMMA4_FAMILIES
from tests.runtime.test_parity_random import random_pair
from tests.runtime.tree_launch import Case, Question, build_launch


@pytest.fixture(scope="module", params=["llama", "gemma3", *GEMMA4_FAMILIES])
def model(request, tmp_path_factory):
    ours, _ = random_pair(request.param, tmp_path_factory.mktemp(request.param))
    return ours


def _cases():
    g = torch.Generator().manual_seed(3)
    draw = lambda n: tuple(torch.randint(1, 96, (n,), generator=g).tolist())  # noqa: E731
    return [Case(draw(10), (Question(draw(3), (draw(5), draw(8))), Question(draw(4), (draw(7),)))),
            Case(draw(7), (Question(draw(2), (draw(9), draw(1))),))]


def _prompt_rows(placed):
    """(case, question, prompt row) for every question, following build_launch's order."""
    out = []
    for index, (start, case) in enumerate(placed):
        row = start + len(case.content)
        for qi, question in enumerate(case.questions):
            row += len(question.prompt)
            out.append((index, qi, row - 1))
            row += sum(map(len, question.options))
    return out


@pytest.mark.parametrize("rows", [None, 8])
def test_forced_decode_equals_the_tree_forward(model, rows):
    """`rows=8`: the fixed-shape path, eagerly; an answer's tokens then span launches (its slot keeps the rows)."""
    cases = _cases()
    placed = [(0, cases[0]), (64, cases[1])]
    launch, keys = build_launch(placed, 128)
    tree, k, v = forward_keeping_kv(model, launch)
    want = {}
    for key, value in zip(keys, tree.tolist()):
        case, q, o, _ = key
        want[(case, q, o)] = want.get((case, q, o), 0.0) + value
    pool = KeyPool(k, v, launch.positions)
    starts, owners = [], []
    for case, q, row in _prompt_rows(placed):
        options = cases[case].questions[q].options
        seen = visible_rows(launch.ends, row, placed[case][0])
        starts.append(Start(Forced(list(options)), seen, int(launch.tokens[row]), int(launch.positions[row]),
                            max(map(len, options))))
        owners.append((case, q))
    stats = walk(model, pool, starts, rows=rows) if rows else walk(model, pool, starts)
    assert stats.beam_rows == sum(len(o) for c in cases for q in c.questions for o in q.options)
    for start, (case, q) in zip(starts, owners):
        for o, got in enumerate(start.walker.logprobs):
            assert abs(got - want[(case, q, o)]) < 1e-4, (case, q, o, got, want[(case, q, o)])


def test_a_context_appended_to_the_pool_reads_the_same(model):
    """A floor's context is gathered out of its pass and appended to another pass's pool: the same answers."""
    cases = _cases()
    launch, keys = build_launch([(0, cases[0])], 64)
    tree, k, v = forward_keeping_kv(model, launch)
    (_, _, row), *_ = _prompt_rows([(0, cases[0])])
    options = list(cases[0].questions[0].options)
    direct = Forced(options)
    walk(model, KeyPool(k, v, launch.positions), [Start(direct, visible_rows(launch.ends, row, 0),
                                                       int(launch.tokens[row]), int(launch.positions[row]), 8)])
    context = gather_context(k, v, launch.tokens, launch.positions, launch.ends, row, 0)
    other, _ = build_launch([(0, cases[1])], 64)
    _, k2, v2 = forward_keeping_kv(model, other)
    pool = KeyPool(k2, v2, other.positions)
    moved, noise = Forced(options), Forced(list(cases[1].questions[0].options))
    (_, _, row2), = _prompt_rows([(0, cases[1])])
    walk(model, pool, [Start(noise, visible_rows(other.ends, row2, 0), int(other.tokens[row2]),
                             int(other.positions[row2]), 9),
                       Start(moved, pool.append(context), context.token, context.position, 8)])
    assert max(abs(a - b) for a, b in zip(direct.logprobs, moved.logprobs)) < 1e-5


def _greedy_reference(model, prefix: tuple[int, ...], steps: int) -> tuple[list[int], list[float]]:
    """Greedy tokens and their log-probabilities by the model's own one-sequence KV-cached decode."""
    from spinfc.runtime.models.decode import KVCache

    cache = KVCache(model.config.layers)
    logits = model.decode(torch.tensor(prefix), cache)
    tokens, logprobs = [], []
    for _ in range(steps):
        row = torch.log_softmax(logits.float(), dim=-1)
        token = int(torch.argmax(row))
        tokens.append(token)
        logprobs.append(float(row[token]))
        logits = model.decode(torch.tensor([token]), cache)
    return tokens, logprobs


@pytest.mark.parametrize("rows", [None, 2])
def test_greedy_steps_equal_the_models_own_decode(model, rows):
    """Sampled walkers (greedy) of three prompts on two contents step together: each one's tokens and
    log-probabilities are the one-sequence decode's. `rows=2` runs the fixed-shape path eagerly (launches of two
    rows, padding, the walkers in two groups)."""
    from spinfc.runtime.extract.beams import Sample
    from spinfc.runtime.launch.generate import Sampling

    cases = _cases()
    placed = [(0, cases[0]), (64, cases[1])]
    launch, _ = build_launch(placed, 128)
    _, k, v = forward_keeping_kv(model, launch)
    pool = KeyPool(k, v, launch.positions)
    steps = 9  # past Gemma's window of 6 positions
    starts, prefixes = [], []
    for case, q, row in _prompt_rows(placed):
        walker = Sample(None, frozenset(), "", Sampling(max_tokens=steps, temperature=0.0))
        rows_seen = visible_rows(launch.ends, row, placed[case][0])
        starts.append(Start(walker, rows_seen, int(launch.tokens[row]), int(launch.positions[row]), steps))
        prefixes.append(cases[case].content + cases[case].questions[q].prompt)
    stats = walk(model, pool, starts, rows=rows) if rows else walk(model, pool, starts)
    assert stats.steps == (steps if rows is None else 2 * steps)
    for start, prefix in zip(starts, prefixes):
        tokens, logprobs = _greedy_reference(model, prefix, steps)
        assert start.walker.tokens == tokens
        assert abs(start.walker.logprob - sum(logprobs)) < 1e-4
