"""POST /v1/completions and chat logprobs through the official `openai` SDK against a live server (the real
gemma3-270m, float32 on the CPU): the scoring call's token logprobs equal transformers' own and /v1/score's for the
same text, lm-evaluation-harness's call (token-id prompts, max_tokens 1, echo, logprobs 1) has the shape it
parses, and a chat completion's logprobs are OpenAI's `content[*]`."""

from __future__ import annotations

import httpx
import openai
import pytest
import torch

from spinfc.config import EngineSettings, Settings
from spinfc.registry import load_tokenizer
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server

pytestmark = pytest.mark.slow

CONTENT = "Customer support message:\nI was charged twice for September, please refund one of the charges."
QUESTION = "\n\nIs the customer asking for a refund?\nAnswer:"
OPTION = " yes"
TEXT = CONTENT + QUESTION + OPTION
TOLERANCE = 1e-4  # the CPU reference against transformers: 1.3e-5 measured on an Intel Xeon (Gemma 3)


@pytest.fixture(scope="module")
def url():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"))
    with live_server(create_app(settings, load_model=load_shared)) as base:
        yield base


@pytest.fixture(scope="module")
def sdk(url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("gemma3-270m")


@pytest.fixture(scope="module")
def scored(sdk):
    """The scoring call as a client written for OpenAI or vLLM sends it."""
    return sdk.completions.create(model="gemma3-270m", prompt=TEXT, echo=True, logprobs=1, max_tokens=0)


def test_the_scoring_call_answers_every_prompt_token(scored, tokenizer):
    (choice,) = scored.choices
    ids = tokenizer(TEXT)["input_ids"]
    logprobs = choice.logprobs
    assert choice.text == TEXT and choice.finish_reason == "length"
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.top_logprobs) == len(ids)
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    assert logprobs.tokens == [tokenizer.decode([i]) for i in ids]
    assert all(lp < 0 for lp in logprobs.token_logprobs[1:])
    for token, logprob, top in zip(logprobs.tokens[1:], logprobs.token_logprobs[1:], logprobs.top_logprobs[1:]):
        assert top[token] == logprob and 1 <= len(top) <= 2  # the top token, and the chosen one when it is not
    assert [TEXT[o:o + len(t)] for o, t in zip(logprobs.text_offset[1:], logprobs.tokens[1:])] == logprobs.tokens[1:]
    assert scored.usage.prompt_tokens == len(ids) and scored.usage.completion_tokens == 0


def test_token_logprobs_equal_transformers(scored, tokenizer, reference_model):
    theirs = reference_model("gemma3-270m")
    ids = tokenizer(TEXT)["input_ids"]
    with torch.no_grad():
        logprobs = torch.log_softmax(theirs(torch.tensor([ids])).logits[0].float(), dim=-1)
    want = logprobs[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    got = torch.tensor(scored.choices[0].logprobs.token_logprobs[1:])
    difference = (got - want).abs().max().item()
    print(f"max |completions - transformers| = {difference:.2e} over {len(ids) - 1} tokens")
    assert difference < TOLERANCE


def test_token_logprobs_equal_score_for_the_same_text_as_an_option(scored, url, tokenizer):
    body = {"messages": [{"role": "user", "content": CONTENT}],
            "scoring": {"queries": [{"id": "q", "template": QUESTION + "<?>", "options": [OPTION]}]}}
    answer = httpx.post(f"{url}/v1/score", json=body, timeout=600).json()
    option = answer["results"][0]["combinations"][0]["options"][0]
    option_tokens = len(tokenizer(OPTION, add_special_tokens=False)["input_ids"])
    summed = sum(scored.choices[0].logprobs.token_logprobs[-option_tokens:])
    print(f"|completions - score| = {abs(summed - option['logprob']):.2e}")
    assert abs(summed - option["logprob"]) < TOLERANCE


def test_lm_evaluation_harness_loglikelihood_call(sdk, scored, tokenizer):
    """local-completions sends token ids with max_tokens 1, echo and logprobs 1, and reads token_logprobs[ctxlen:-1]
    (the last entry is the generated token) and is_greedy from top_logprobs."""
    ids = tokenizer(TEXT)["input_ids"]
    context = len(tokenizer(CONTENT + QUESTION)["input_ids"])
    short = tokenizer(CONTENT)["input_ids"]
    answer = sdk.completions.create(model="gemma3-270m", prompt=[ids, short], max_tokens=1, logprobs=1, echo=True,
                                    temperature=0, seed=1234)
    first, second = sorted(answer.choices, key=lambda c: c.index)
    logprobs = first.logprobs
    assert len(logprobs.token_logprobs) == len(ids) + 1
    continuation = logprobs.token_logprobs[context:-1]
    expected = scored.choices[0].logprobs.token_logprobs[context:]
    assert max(abs(a - b) for a, b in zip(continuation, expected)) < TOLERANCE  # packed with another prompt
    is_greedy = all(lp == max(top.values()) for lp, top in zip(continuation, logprobs.top_logprobs[context:-1]))
    generated, top = logprobs.token_logprobs[-1], logprobs.top_logprobs[-1]
    assert generated == max(top.values())  # at temperature 0 the generated token is the most likely one
    assert first.text.startswith(tokenizer.decode(ids, skip_special_tokens=True))
    assert isinstance(is_greedy, bool) and len(second.logprobs.token_logprobs) == len(short) + 1
    assert answer.usage.completion_tokens == 2


def test_generation_with_logprobs_and_a_list_of_strings(sdk):
    answer = sdk.completions.create(model="gemma3-270m", prompt=["The capital of France is", "One, two,"],
                                    max_tokens=3, temperature=0, logprobs=2)
    assert [c.index for c in answer.choices] == [0, 1]
    for choice in answer.choices:
        logprobs = choice.logprobs
        assert "".join(logprobs.tokens) == choice.text and len(logprobs.tokens) == 3
        assert all(lp == max(top.values()) for lp, top in zip(logprobs.token_logprobs, logprobs.top_logprobs))


def test_chat_completion_logprobs(sdk):
    answer = sdk.chat.completions.create(model="gemma3-270m", messages=[{"role": "user", "content": "Say hello."}],
                                         max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    content = answer.choices[0].logprobs.content
    assert 1 <= len(content) <= 3
    for entry in content:
        assert len(entry.top_logprobs) == 2 and entry.logprob == entry.top_logprobs[0].logprob  # greedy
        assert bytes(entry.bytes).decode() == entry.token
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        sdk.chat.completions.create(model="gemma3-270m", messages=[{"role": "user", "content": "Hi"}], max_tokens=1,
                                    top_logprobs=2)


def test_completion_errors_are_openai_envelopes(sdk):
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.completions.create(model="gemma3-270m", prompt=[[1, 2], 3], max_tokens=0)
    assert raised.value.code == "invalid_prompt"
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.completions.create(model="gemma3-270m", prompt=[10**9], max_tokens=0)
    assert raised.value.code == "invalid_token_id"
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.completions.create(model="gemma3-270m", prompt="x", max_tokens=1, n=2)
    assert raised.value.code == "unsupported_parameter"


def test_a_prompt_longer_than_a_pass_is_read_alone_in_a_longer_one(url):
    """On the CPU a prompt over the 512-row budget is read alone in a pass of its own length (Shapes.largest): every
    token scored; past max_content_tokens it is that limit's 400."""
    response = httpx.post(f"{url}/v1/completions", json={"prompt": [7] * 600, "max_tokens": 0, "echo": True,
                                                          "logprobs": 1}, timeout=600)
    assert response.status_code == 200, response.text
    logprobs = response.json()["choices"][0]["logprobs"]["token_logprobs"]
    assert len(logprobs) == 600 and logprobs[0] is None and all(x <= 0 for x in logprobs[1:])
    response = httpx.post(f"{url}/v1/completions", json={"prompt": [7] * 5000, "max_tokens": 0, "echo": True,
                                                          "logprobs": 1}, timeout=600)
    assert response.status_code == 400 and response.json()["error"]["param"] == "prompt", response.text
