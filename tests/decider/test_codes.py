"""Codes instead of options, without a model: the query key in a request and a pack (errors located with
file:line:col), the IR's printout, tokenize against a decision model's codes (each code one read of its head row) and
its refusals, and config.json's decision heads (id2label, what is refused)."""

from __future__ import annotations

import pytest

from spinfc import compiler
from spinfc.errors import CompileError
from spinfc.frontend import load_pack, program_from_request
from spinfc.ir.printer import print_ir
from spinfc.passes import PassContext
from spinfc.runtime.models.families import from_hf
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel
from spinfc.shapes import Shapes

CODES = ("billing", "refund", "technical", "other")
HEADER = """id = "acme/codes"
version = "1.0.0"
description = "A decision model's pack."
models = ["acme/decider"]

[[questions]]
id = "queue"
template = "\\n\\nQueue:<?>"
"""


class CharTokenizer:
    """One token per character (its code point): enough for tokenize, which codes do not depend on."""

    pad_token_id = 0

    def __call__(self, text, add_special_tokens=False, split_special_tokens=True):
        if isinstance(text, list):
            return {"input_ids": [[ord(c) for c in t] for t in text]}
        return {"input_ids": [ord(c) for c in text]}


def compiled(queries: list[dict], codes=CODES):
    body = {"messages": [{"role": "user", "content": "Charged twice."}], "scoring": {"queries": queries}}
    ctx = PassContext(tokenizer=CharTokenizer(), shapes=Shapes(512, 16), codes=codes)
    return compiler.compile(program_from_request(body, "acme/decider"), ctx, until="dedupe-prefixes", verify=True)


def slot(program, query_id: str):
    return next(q.slot for q in program.questions if q.query_id == query_id)


def test_codes_read_the_head_rows_of_the_model():
    program = compiled([{"id": "all", "template": "\n\nQueue:<?>", "codes": "all"},
                        {"id": "two", "template": "\n\nWhich?<?>", "codes": ["technical", "billing"]}])
    every = slot(program, "all")
    assert every.codes and [o.text for o in every.options] == list(CODES)
    assert [o.tokens for o in every.options] == [(0,), (1,), (2,), (3,)]
    assert [(o.text, o.tokens) for o in slot(program, "two").options] == [("technical", (2,)), ("billing", (0,))]
    printed = print_ir(program)
    assert "codes['technical', 'billing']" in printed and "code 0 'technical': head row 2" in printed
    assert "read q1 code 1 'billing' step 0 -> head row 0" in printed


@pytest.mark.parametrize(("query", "codes", "code"), [
    ({"template": "\n\nRefund?<?>", "options": [" yes", " no"]}, CODES, "options_on_decision_model"),
    ({"template": '\n\nMonth: "<*>"'}, CODES, "extraction_on_decision_model"),
    ({"template": "\n\nHow many? <n>"}, CODES, "extraction_on_decision_model"),
    ({"template": "\n\nReply: <gen>"}, CODES, "extraction_on_decision_model"),
    ({"template": "\n\nQueue:<?>", "codes": ["billing", "shipping"]}, CODES, "unknown_code"),
    ({"template": "\n\nQueue:<?>", "codes": "all"}, (), "codes_without_decision_model"),
])
def test_what_a_decision_model_cannot_read_is_refused_by_name(query, codes, code):
    with pytest.raises(CompileError) as caught:
        compiled([{"id": "q", **query}], codes)
    assert caught.value.code == code and caught.value.hint


@pytest.mark.parametrize(("line", "code", "column"), [
    ('codes = ["billing", "billing"]', "duplicate_code", 21),
    ('codes = "some"', "invalid_value", 9),
    ("codes = []", "empty_list", 9),
    ('codes = "all"\noptions = [" yes"]', "options_and_codes", 1),
])
def test_pack_code_mistakes_name_file_line_and_column(tmp_path, line, code, column):
    path = tmp_path / "pack.toml"
    path.write_text(HEADER + line + "\n")
    with pytest.raises(CompileError) as caught:
        load_pack(path)
    error = caught.value
    assert (error.code, error.loc.line, error.loc.column) == (code, 9, column), str(error)
    assert str(error).startswith(f"{path}:9:{column}: error: ")


def test_codes_on_an_extraction_slot_are_located(tmp_path):
    path = tmp_path / "pack.toml"
    path.write_text(HEADER.replace("Queue:<?>", "Queue: <*>") + 'codes = "all"\n')
    with pytest.raises(CompileError) as caught:
        load_pack(path)
    assert (caught.value.code, caught.value.loc.line, caught.value.loc.column) == ("codes_not_allowed", 9, 1)


def test_a_pack_naming_codes_loads_with_categories_over_them(tmp_path):
    path = tmp_path / "pack.toml"
    path.write_text(HEADER + 'codes = "all"\n\n[[questions]]\nid = "pair"\ntemplate = "\\n\\nPair:<?>"\n'
                    'codes = ["billing", "refund"]\n\n[[categories]]\nid = "money"\ncombine = "max"\nmembers = ['
                    '{ question = "queue", option = "refund" }, { question = "pair", option = "billing" }]\n')
    pack = load_pack(path)
    assert [q.slot.codes for q in pack.queries] == [True, True]
    bad = path.read_text().replace('question = "pair", option = "billing"', 'question = "pair", option = "other"')
    path.write_text(bad)
    with pytest.raises(CompileError) as caught:
        load_pack(path)
    assert caught.value.code == "unknown_option"


def _hf(**extra) -> dict:
    return {"architectures": ["LlamaForSequenceClassification"], "model_type": "llama", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
            "vocab_size": 96, "id2label": {str(i): code for i, code in enumerate(CODES)}, **extra}


def test_config_reads_the_codes_and_keeps_them_through_json():
    config = from_hf(_hf())
    assert config.codes == CODES
    assert ModelConfig.from_json(config.to_json()) == config
    assert from_hf({**_hf(), "architectures": ["LlamaForCausalLM"]}).codes is None


@pytest.mark.parametrize(("extra", "words"), [
    ({"problem_type": "multi_label_classification"}, "single_label_classification"),
    ({"id2label": {str(i): f"c{i}" for i in range(256)}}, "2 to 255"),
    ({"id2label": {"0": "a", "1": "a"}}, "distinct"),
    ({"id2label": {"0": "a", "2": "b"}}, "every row"),
    ({"model_type": "gemma4", "architectures": ["Gemma4ForSequenceClassification"]}, "Llama, Qwen3, Gemma 3"),
])
def test_config_refuses_heads_it_cannot_read_as_one_distribution(extra, words):
    with pytest.raises(UnsupportedModel) as caught:
        from_hf(_hf(**extra))
    assert words in str(caught.value)


def test_listed_codes_count_against_max_options_before_anything_is_compiled():
    from spinfc.config.limits import Limits
    from spinfc.errors import RequestError
    from spinfc.frontend.request_schema import ScoringQuery
    from spinfc.runtime.admit.prechecks import Prechecks

    checks = Prechecks(Limits(max_options=3), 16)
    checks.queries([ScoringQuery(id="q", template="Queue:<?>", codes="all")])
    with pytest.raises(RequestError) as caught:
        checks.queries([ScoringQuery(id="q", template="Queue:<?>", codes=list(CODES))])
    assert caught.value.code == "max_options_exceeded" and caught.value.param == "scoring.queries[0].codes"
