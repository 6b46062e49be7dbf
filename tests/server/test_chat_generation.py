"""Generation behind /v1/chat/completions, below the HTTP layer: the KV-cached decode against the packed forward
and against transformers' greedy generate on the same GGUF, the prompt formats, token picking, the generation
loop's stopping rules (how generations take turns with passes: tests/engine/test_generation_turns.py)."""

from __future__ import annotations

import threading

import pytest
import torch

from spinfc.backend.launch import Launch
from spinfc.registry import load_tokenizer
from spinfc.runtime.admit.chat_format import ChatPrompt, chat_prompt, plain_transcript
from spinfc.runtime.launch.generate import Sampling, first_stop, generate, pick, settled
from spinfc.runtime.models.decode import KVCache

pytestmark = pytest.mark.slow  # loads a packaged model

QUESTION = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of France?"}]


def whole_sequence_launch(tokens: list[int], vocab: int) -> Launch:
    """One sequence as a packed launch whose reads are every vocabulary token at the last row: [V] logprobs."""
    n = len(tokens)
    return Launch(
        tokens=torch.tensor(tokens), positions=torch.arange(n), ends=torch.full((n,), n, dtype=torch.int32),
        spans=((0, n),), rows=torch.tensor([n - 1]), read_row=torch.zeros(vocab, dtype=torch.int64),
        read_token=torch.arange(vocab),
    )


@pytest.mark.parametrize("name", ["gemma3-270m"])
def test_cached_decode_equals_the_packed_forward_past_the_sliding_window(name, packaged_model) -> None:
    """Gemma's sliding layers see 512 positions: a 530-token prompt, then two cached steps, each step's
    distribution equal to the packed forward of the whole sequence (which is parity-tested against transformers)."""
    model = packaged_model(name)
    window = model.config.sliding_window
    draws = torch.randint(10, 5000, (window + 17,), generator=torch.Generator().manual_seed(0))
    sequence = [2] + [int(t) for t in draws]  # <bos>, then past the window
    cache = KVCache(model.config.layers)
    logits = model.decode(torch.tensor(sequence), cache)
    for step in range(2):
        want = model.forward(whole_sequence_launch(sequence, model.config.vocab))  # [V]
        got = torch.log_softmax(logits, dim=-1)
        assert (got - want).abs().max().item() < 1e-4, step
        token = int(got.argmax())
        sequence.append(token)
        logits = model.decode(torch.tensor([token]), cache)
    assert cache.length == len(sequence)


def test_greedy_generation_matches_transformers_generate(packaged_model, reference_model) -> None:
    """SmolLM2-135M-Instruct through its own chat template: the first 8 greedy tokens are transformers'."""
    name = "smollm2-135m"
    theirs, model = reference_model(name), packaged_model(name)
    prompt = chat_prompt(load_tokenizer(name), QUESTION)
    assert prompt.template == "chat_template"
    ids = torch.tensor([prompt.tokens])
    # the mask is explicit: SmolLM2's pad token is <|im_end|>, which the prompt holds, and transformers would mask it
    want = theirs.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                           eos_token_id=None)[0, ids.shape[1]:].tolist()
    got = generate(model, load_tokenizer(name), attrs_evolve_no_end(prompt), Sampling(max_tokens=8, temperature=0))
    assert list(got.tokens) == want
    assert got.finish_reason == "length" and got.prompt_tokens == len(prompt.tokens)


def attrs_evolve_no_end(prompt: ChatPrompt) -> ChatPrompt:
    """The prompt without end tokens, so both sides draw exactly 8 tokens."""
    import attrs

    return attrs.evolve(prompt, end_tokens=frozenset())


def test_prompt_formats() -> None:
    smol = load_tokenizer("smollm2-135m")
    prompt = chat_prompt(smol, QUESTION)
    text = smol.decode(list(prompt.tokens))
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nWhat is the capital" in text
    assert smol.convert_tokens_to_ids("<|im_end|>") in prompt.end_tokens and prompt.stop == ()

    gemma = load_tokenizer("gemma3-270m")  # the base model's GGUF has no chat template: the plain transcript
    prompt = chat_prompt(gemma, QUESTION)
    assert prompt.template == "plain" and prompt.stop == ("\nUser:", "\nSystem:")
    assert gemma.decode(list(prompt.tokens)) == (
        "<bos>System: Answer briefly.\n\nUser: What is the capital of France?\n\nAssistant:")
    assert {gemma.eos_token_id, gemma.convert_tokens_to_ids("<end_of_turn>")} <= prompt.end_tokens
    assert plain_transcript([{"role": "tool", "content": "42"}]) == "Tool: 42\n\nAssistant:"


def test_pick_greedy_top_p_and_seed() -> None:
    logits = torch.tensor([0.0, 3.0, 2.9, -5.0])
    assert pick(logits, Sampling(max_tokens=1, temperature=0), None) == 1
    nucleus = Sampling(max_tokens=1, temperature=1.0, top_p=0.9)  # tokens 1 and 2 hold ~0.93 of the mass
    draws = [pick(logits, nucleus, torch.Generator().manual_seed(s)) for s in range(200)]
    assert set(draws) == {1, 2}
    tiny = Sampling(max_tokens=1, temperature=1.0, top_p=1e-6)  # only the most likely token is left
    assert {pick(logits, tiny, torch.Generator().manual_seed(s)) for s in range(20)} == {1}
    again = [pick(logits, nucleus, torch.Generator().manual_seed(s)) for s in range(200)]
    assert again == draws


def test_first_stop() -> None:
    assert first_stop("Paris.\nUser: next", ("\nUser:", ".")) == 5
    assert first_stop("Paris", ("\nUser:",)) is None


def test_settled_text_holds_back_what_could_begin_a_stop_string() -> None:
    plain = ChatPrompt(tokens=(), end_tokens=frozenset(), stop=("\nUser:",), strip=True)
    assert settled(" Paris is the capital.\nUs", plain.stop, plain) == "Paris is the capita"  # 5 characters held
    assert settled(" Paris    \n\n\n", plain.stop, plain) == "Paris"  # the finished answer drops trailing whitespace
    assert settled("caf\ufffd", (), ChatPrompt(tokens=(), end_tokens=frozenset())) == "caf"  # bytes still coming


class Scripted:
    """A model double: `decode` makes the scripted tokens certain, one per call, and checks the lock is held."""

    def __init__(self, script: list[int], vocab: int, lock: threading.Lock):
        self.script, self.vocab, self.lock, self.calls = script, vocab, lock, 0
        self.config = type("Config", (), {"layers": 1})()
        self.device = torch.device("cpu")

    def decode(self, tokens, cache):
        assert self.lock.locked(), "a generation step ran without the model's lock"
        logits = torch.full((self.vocab,), -1e9)
        logits[self.script[self.calls]] = 0.0
        self.calls += 1
        return logits


class Letters:
    """A tokenizer double: token i is the i-th character of ALPHABET."""

    ALPHABET = "abc XY.\n"

    def decode(self, tokens, skip_special_tokens=False):
        return "".join(self.ALPHABET[t] for t in tokens)


def run_script(script, sampling, end_tokens=frozenset(), stop=()):
    lock = threading.Lock()
    model = Scripted(script, len(Letters.ALPHABET), lock)
    prompt = ChatPrompt(tokens=(0,), end_tokens=frozenset(end_tokens), stop=stop)
    return generate(model, Letters(), prompt, sampling, lock), model


def test_generation_stops_at_an_end_token_a_stop_string_or_max_tokens() -> None:
    at_end, _ = run_script([0, 1, 7, 2], Sampling(max_tokens=10, temperature=0), end_tokens={7})
    assert (at_end.text, at_end.tokens, at_end.finish_reason) == ("ab", (0, 1, 7), "stop")
    at_stop, model = run_script([0, 3, 4, 5, 6, 1], Sampling(max_tokens=10, temperature=0, stop=("XY",)))
    assert (at_stop.text, at_stop.finish_reason, model.calls) == ("a ", "stop", 4)
    from_format, _ = run_script([0, 7, 4, 5, 1], Sampling(max_tokens=10, temperature=0), stop=("\nX",))
    assert (from_format.text, from_format.finish_reason) == ("a", "stop")
    at_length, _ = run_script([0, 1, 2, 0, 1], Sampling(max_tokens=3, temperature=0))
    assert (at_length.text, at_length.tokens, at_length.finish_reason) == ("abc", (0, 1, 2), "length")
