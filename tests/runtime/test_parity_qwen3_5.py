"""Qwen3.5, dense and MoE, on random weights of its real config's ratios (three Gated DeltaNet layers to one
full-attention layer) against transformers' Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM on the same weights: every option's logprob, each question branching
off its content's recurrent state in one pass, within 1e-4 of transformers running each question as its own full
sequence; greedy generation from the model's cache of states equal to transformers' greedy generate."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend.chains import chains_of
from spinfc.backend.gated_delta import recurrent_reference, reference
from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.launch.generate import Sampling, generate
from spinfc.runtime.load.loader import load_model

from .forward_context_checks import check_forward_context
from .qwen3_5_random import random_qwen3_5
from .tree_launch import Case, Question, build_launch, transformers_logprobs

TOLERANCE = 1e-4


@pytest.fixture(scope="module", params=["dense", "moe"])
def pair(tmp_path_factory, request):
    directory = tmp_path_factory.mktemp(f"qwen3_5_{request.param}")
    theirs = random_qwen3_5(directory, moe=request.param == "moe")
    return load_model(str(directory)), theirs


def _case(generator, content_length: int, questions: int = 3) -> Case:
    draw = lambda n: tuple(torch.randint(1, 96, (n,), generator=generator).tolist())  # noqa: E731
    return Case(draw(content_length), tuple(Question(draw(4), (draw(1), draw(3), draw(2))) for _ in range(questions)))


def test_branches_continue_the_content_state(pair, seed):
    """A content longer than one 64-row chunk of the recurrence, and a short one, packed in one pass."""
    ours, theirs = pair
    generator = torch.Generator().manual_seed(seed)
    cases = [_case(generator, 70), _case(generator, 9)]
    launch, keys = build_launch([(0, cases[0]), (128, cases[1])], 192)
    got = ours.forward(launch)
    want = {}
    for index, case in enumerate(cases):
        for key, value in zip(case.reads(), transformers_logprobs(theirs, case)):
            want[(index, *key)] = value
    difference = (got - torch.stack([want[key] for key in keys])).abs().max().item()
    print(f"random qwen3_5: max |logprob - transformers| = {difference:.2e} over {got.numel()} reads")
    assert difference < TOLERANCE


def test_a_forward_keeps_its_state_in_its_context(pair):
    generator = torch.Generator().manual_seed(2)
    launch, _ = build_launch([(0, _case(generator, 70)), (128, _case(generator, 9))], 192)
    check_forward_context(pair[0], launch)


def test_greedy_generation_matches_transformers(pair, seed):
    ours, theirs = pair
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(1, 96, (11,), generator=generator).tolist()
    want = theirs.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                           pad_token_id=0)[0, len(prompt):].tolist()
    got = generate(ours, _Tokens(), ChatPrompt(tokens=tuple(prompt), end_tokens=frozenset()),
                   Sampling(max_tokens=8, temperature=0.0))
    assert list(got.tokens) == want


class _Tokens:
    def decode(self, tokens, skip_special_tokens=False):
        return " ".join(map(str, tokens))


def test_chains_follow_the_question_tree():
    """A content of 3 rows, one question of 2 rows with two options (1 and 2 rows): the content and the question
    stem are one segment (the content has one child), each option a segment from the stem's last row."""
    case = Case((5, 6, 7), (Question((8, 9), ((10,), (11, 12))),))
    launch, _ = build_launch([(0, case), (16, case)], 32)
    chains = chains_of(launch.ends, launch.spans)
    assert [level.lengths for level in chains.levels] == [(5, 5), (1, 2, 1, 2)]
    assert chains.levels[1].parents.tolist() == [0, 0, 1, 1]
    assert chains.parent[:8].tolist() == [-1, 0, 1, 2, 3, 4, 4, 6]
    split = chains_of(launch.ends, launch.spans, split_before=[4])
    assert [level.lengths for level in split.levels] == [(4, 5), (1, 1, 2), (1, 2)]


def test_chunked_reference_matches_the_plain_recurrence(seed):
    generator = torch.Generator().manual_seed(seed)
    n, Hk, Hv, Dk, Dv = 150, 2, 4, 8, 6
    q, k = (torch.randn(n, Hk, Dk, generator=generator) for _ in range(2))
    v = torch.randn(n, Hv, Dv, generator=generator)
    g = -torch.rand(n, Hv, generator=generator)
    beta = torch.rand(n, Hv, generator=generator)
    cu = [0, 70, 71, 150]
    initial = torch.randn(3, Hv, Dk, Dv, generator=generator)
    out, final = reference(q, k, v, g, beta, cu, initial)
    for s in range(3):
        a, b = cu[s], cu[s + 1]
        want, state = recurrent_reference(q[a:b].repeat_interleave(2, 1), k[a:b].repeat_interleave(2, 1), v[a:b],
                                          g[a:b], beta[a:b], initial[s])
        assert torch.allclose(out[a:b], want, atol=1e-4)
        assert torch.allclose(final[s], state, atol=1e-4)


def test_the_text_part_of_a_multimodal_checkpoint_loads(pair, tmp_path):
    """Qwen3_5ForConditionalGeneration's layout: config.json with a `text_config`, the text weights under
    `model.language_model.`, a vision tower beside them (left out): the same model as the text checkpoint."""
    import json

    from safetensors.torch import save_file

    ours, theirs = pair
    text = theirs.config.to_dict()
    kind = "qwen3_5_moe" if ours.config.experts is not None else "qwen3_5"
    architecture = "Qwen3_5MoeForConditionalGeneration" if ours.config.experts is not None else \
        "Qwen3_5ForConditionalGeneration"
    config = {"model_type": kind, "architectures": [architecture], "text_config": text, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    state = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v.contiguous()
             for k, v in theirs.state_dict().items()}
    state["model.visual.patch_embed.proj.weight"] = torch.zeros(2, 2)
    save_file(state, str(tmp_path / "model.safetensors"))
    other = load_model(str(tmp_path))
    case = Case((5, 6, 7, 8), (Question((9, 10), ((11,), (12, 13))),))
    launch, _ = build_launch([(0, case)], 32)
    assert torch.equal(other.forward(launch), ours.forward(launch))


def test_rows_no_read_depends_on_are_skipped():
    """With the answer rows given, a one-token option's own row (read from its parent) is in no segment, and a
    two-token option keeps only its first row (the row that reads its second token)."""
    case = Case((5, 6, 7), (Question((8, 9), ((10,), (11, 12))),))
    launch, _ = build_launch([(0, case)], 16)
    chains = chains_of(launch.ends, launch.spans, live=launch.rows.tolist())
    assert launch.rows.tolist() == [4, 6]
    assert [level.lengths for level in chains.levels] == [(5,), (1,)]
    assert chains.levels[1].rows.tolist() == [6]


@pytest.mark.parametrize("scheme", ["fp16-mixed", "bf16-mixed", "bf16"])
def test_the_half_schemes_run_close_to_float32(pair, tmp_path, scheme):
    """The CUDA schemes' roundings on the CPU reference (the delta rule's float32 output written into the half
    stream) stay near float32 on the random model: measured fp16-mixed 8.6e-5 (dense) / 3.3e-4 (MoE), bf16 up to
    1.3e-2 (bf16-mixed MoE: bf16's 8-bit mantissa); bounds 0.005 and 0.03."""
    from spinfc.runtime.load.precision import Precision

    ours, theirs = pair
    theirs.save_pretrained(tmp_path)
    half = torch.bfloat16 if scheme.startswith("bf16") else torch.float16
    precision = Precision.mixed(half) if scheme.endswith("mixed") else Precision.uniform(half)
    other = load_model(str(tmp_path), precision=precision)
    case = Case(tuple(range(5, 40)), (Question((9, 10), ((11,), (12, 13))), Question((20, 21), ((30,), (31,)))))
    launch, _ = build_launch([(0, case)], 64)
    assert other.scheme == scheme
    bound = 0.03 if scheme.startswith("bf16") else 0.005
    assert (other.forward(launch) - ours.forward(launch)).abs().max().item() < bound


def test_the_layers_read_nothing_back_from_the_device(pair, monkeypatch):
    """A forward's chains and every level's index tensors are made once, from the launch's host copy: a Gated
    DeltaNet layer reads no tensor back to the host (on CUDA each such read waits for the whole queue, and the
    GPU idles while the host plans the next layer). Counted on the CPU by the reads a layer would make."""
    from spinfc.runtime.models.state_flow import TreeFlow

    ours, _ = pair
    generator = torch.Generator().manual_seed(3)
    launch, _ = build_launch([(0, _case(generator, 70)), (128, _case(generator, 9))], 192)
    config = ours.config
    flow = TreeFlow(config, launch)
    T, lin = launch.budget, config.linear
    reads = []
    for name in ("tolist", "item", "__int__", "__bool__", "cpu", "numpy"):
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name, **k: (reads.append(_n),
                                                                                             _o(self, *a, **k))[1])
    x = torch.randn(T, lin.conv_channels)
    flow.conv(0, x, torch.randn(lin.conv_channels, lin.conv_kernel))
    q, k = torch.randn(T, lin.key_heads, lin.key_dim), torch.randn(T, lin.key_heads, lin.key_dim)
    v = torch.randn(T, lin.value_heads, lin.value_dim)
    g, beta = -torch.rand(T, lin.value_heads), torch.rand(T, lin.value_heads)
    reads.clear()
    flow.delta(0, q, k, v, g, beta)
    flow.conv(1, x, torch.randn(lin.conv_channels, lin.conv_kernel))
    assert [r for r in reads if r != "__bool__"] == [], f"a layer read tensors back to the host: {reads}"


def test_a_moved_launch_keeps_its_host_copy_for_planning(pair):
    generator = torch.Generator().manual_seed(4)
    launch, _ = build_launch([(0, _case(generator, 20))], 64)
    moved = launch.to("cpu")
    assert moved.host is launch and moved.to("cpu").host is launch  # the first host copy, however often moved
