"""The extraction decode of Qwen3.5, dense and MoE (random weights, three Gated DeltaNet layers to one full-attention layer): a
beam continues the recurrent state its prompt had in the scoring pass (kept just before the prompt's last token),
so an option read by decode steps has the tree forward's log-probability, and greedy steps of several prompts on
two contents, batched, are transformers' greedy generate of each content + prompt."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.extract.beams import Forced, Sample
from spinfc.runtime.extract.decode import Start, walk
from spinfc.runtime.extract.kv import KeyPool, forward_keeping_kv, gather_context, states_at, visible_rows
from spinfc.runtime.launch.generate import Sampling
from spinfc.runtime.load.loader import load_model
from tests.extract.test_decode_random import _cases, _prompt_rows
from tests.runtime.qwen3_5_random import random_qwen3_5
from tests.runtime.tree_launch import build_launch


@pytest.fixture(scope="module", params=["dense", "moe"])
def pair(tmp_path_factory, request):
    directory = tmp_path_factory.mktemp(f"qwen3_5_{request.param}")
    theirs = random_qwen3_5(directory, moe=request.param == "moe")
    return load_model(str(directory)), theirs


def _pass(model, placed, budget):
    """The pass of `placed`, its pool (with the states before each prompt row) and the starts' tables."""
    launch, keys = build_launch(placed, budget)
    prompts = _prompt_rows(placed)
    states: dict = {}
    tree, k, v = forward_keeping_kv(model, launch, [row for _, _, row in prompts], states)
    pool = KeyPool(k, v, launch.positions)
    tables = []
    for case, _, row in prompts:
        table = visible_rows(launch.ends, row, placed[case][0])
        pool.states[int(table[-1])] = states_at(states, int(table[-1]))
        tables.append(table)
    return launch, keys, tree, pool, prompts, tables, (k, v, states)


def test_forced_decode_equals_the_tree_forward(pair):
    model, _ = pair
    cases = _cases()
    placed = [(0, cases[0]), (64, cases[1])]
    launch, keys, tree, pool, prompts, tables, _ = _pass(model, placed, 128)
    want = {}
    for key, value in zip(keys, tree.tolist()):
        case, q, o, _ = key
        want[(case, q, o)] = want.get((case, q, o), 0.0) + value
    starts = [Start(Forced(list(cases[case].questions[q].options)), table, int(launch.tokens[row]),
                    int(launch.positions[row]), 9) for (case, q, row), table in zip(prompts, tables)]
    walk(model, pool, starts)
    for start, (case, q, _) in zip(starts, prompts):
        for o, got in enumerate(start.walker.logprobs):
            assert abs(got - want[(case, q, o)]) < 1e-4, (case, q, o, got, want[(case, q, o)])


def test_a_context_appended_to_the_pool_carries_its_state(pair):
    model, _ = pair
    cases = _cases()
    launch, _, _, pool, prompts, tables, (k, v, states) = _pass(model, [(0, cases[0])], 64)
    _, q, row = prompts[0]
    options = list(cases[0].questions[q].options)
    direct = Forced(options)
    walk(model, pool, [Start(direct, tables[0], int(launch.tokens[row]), int(launch.positions[row]), 8)])
    context = gather_context(k, v, launch.tokens, launch.positions, launch.ends, row, 0, states)
    _, _, _, other, _, other_tables, _ = _pass(model, [(0, cases[1])], 64)
    moved = Forced(options)
    walk(model, other, [Start(moved, other.append(context), context.token, context.position, 8)])
    assert max(abs(a - b) for a, b in zip(direct.logprobs, moved.logprobs)) < 1e-5


def test_greedy_steps_equal_transformers_generate(pair):
    model, theirs = pair
    cases = _cases()
    placed = [(0, cases[0]), (64, cases[1])]
    launch, _, _, pool, prompts, tables, _ = _pass(model, placed, 128)
    steps = 7
    starts = [Start(Sample(None, frozenset(), "", Sampling(max_tokens=steps, temperature=0.0)), table,
                    int(launch.tokens[row]), int(launch.positions[row]), steps)
              for (case, q, row), table in zip(prompts, tables)]
    walk(model, pool, starts)
    for start, (case, q, _) in zip(starts, prompts):
        prefix = list(cases[case].content + cases[case].questions[q].prompt)
        want = theirs.generate(torch.tensor([prefix]), max_new_tokens=steps, do_sample=False, eos_token_id=None,
                               pad_token_id=0)[0, len(prefix):].tolist()
        assert start.walker.tokens == want
