"""The output's column scheme: stable names for the queries, each pack's questions, categories and decision."""

import json

import pyarrow as pa

from spinfc.bulk.columns import Layout, slug
from spinfc.bulk.questions import load_questions
from spinfc.wire.results import Combination, OptionScore, QueryResult

from .paths import QUERIES


def test_slugs():
    assert slug(" yes") == "yes"
    assert slug("an order") == "an_order"
    assert slug("with items missing") == "with_items_missing"
    assert slug("!!") == "_"


def test_query_columns_are_named_by_query_option_and_field():
    layout = Layout(load_questions([], QUERIES, "gemma3-270m"))
    assert layout.names[:4] == ["id", "row", "error_code", "error"]
    assert layout.names[4:11] == ["q__refund__yes__p", "q__refund__yes__floor_p", "q__refund__yes__logprob",
                                  "q__refund__no__p", "q__refund__no__floor_p", "q__refund__no__logprob",
                                  "q__refund__residual"]
    assert layout.questions == 2


def test_a_bundled_pack_gives_placeholder_category_and_decision_columns():
    layout = Layout(load_questions(["spinfc/support-triage"], None, "gemma3-270m"))
    names = layout.names
    assert "support_triage__cancel_request__an_order__yes__p" in names
    assert "support_triage__order_problem__with_items_missing__no__floor_p" in names
    assert "support_triage__topic__residual" in names
    assert "support_triage__category__refund" in names
    assert names[-1] == "support_triage__decision"
    assert len(names) == len(set(names))
    assert layout.questions == 21  # 14 plain questions, 3 + 4 placeholder combinations
    schema = layout.schema({"spinfc.system_fingerprint": "fp"})
    assert schema.field("support_triage__decision").type == pa.string()
    assert schema.field("support_triage__category__refund").type == pa.float64()
    column_map = json.loads(schema.metadata[b"spinfc.columns"])
    entry = next(c for c in column_map if c["name"] == "support_triage__cancel_request__an_order__yes__p")
    assert entry == {"name": entry["name"], "pack": "spinfc/support-triage", "query": "cancel_request",
                     "values": {"item": "an order"}, "option": " yes", "field": "p"}


def test_a_name_already_taken_gets_a_suffix(tmp_path):
    queries = [{"id": "x", "template": "\n\nQ?<?>", "options": [" yes", " yes!", " no"]},
               {"id": "x.yes", "template": "\n\nR {v}?<?>", "options": [" p"], "placeholders": {"v": ["x"]}},
               {"id": "x-yes", "template": "\n\nS {v}?<?>", "options": [" p"], "placeholders": {"v": ["x"]}}]
    path = tmp_path / "q.json"
    path.write_text(json.dumps(queries))
    names = Layout(load_questions([], str(path), "gemma3-270m")).names
    # " yes!" slugs to yes, already an option of x: it gets its index
    assert [n for n in names if n.startswith("q__x__")][:6:3] == ["q__x__yes__p", "q__x__yes_1__p"]
    # x.yes and x-yes both slug to x_yes: the second query's names get _2
    assert "q__x_yes__x__p__p" in names and "q__x_yes__x__p__p_2" in names
    assert len(names) == len(set(names))


def test_a_scored_row_fills_every_column_of_the_query():
    layout = Layout(load_questions([], QUERIES, "gemma3-270m"))
    options = [OptionScore(" yes", -0.5, 0.6, 0.3), OptionScore(" no", -0.9, 0.4, 0.7)]
    topic = [OptionScore(text, -1.0, 0.25, 0.25) for text in (" billing", " technical", " account", " shipping")]
    own = [QueryResult("refund", [Combination({}, options, 0.1)]), QueryResult("topic", [Combination({}, topic, 0.2)])]
    row = layout.scored_row(7, "x", own, [])
    assert set(row) == set(layout.names)
    assert row["q__refund__yes__p"] == 0.6 and row["q__refund__no__floor_p"] == 0.7
    assert row["q__refund__yes__logprob"] == -0.5 and row["q__topic__residual"] == 0.2
    assert row["row"] == 7 and row["error_code"] is None
