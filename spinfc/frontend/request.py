"""A /v1/score request body -> the IR `Program` (the body format: seed README, docs/packs.md "Requests").

    {"model": "...",
     "messages": [{"role": "user", "content": "Customer support message:\\n..."}],     one content, or
     "inputs": [{"messages": [...]}, {"messages": [...]}],                            several
     "scoring": {"queries": [{"id": "refund", "template": "...Answer:{?}", "options": [" yes", " no"],
                              "placeholders": {"name": ["v1", "v2"]}}]}}

A content is its messages' texts joined with a blank line; contents are `input-0`, `input-1`, ... in order.
Fields and types are those of `request_schema.ScoreRequest`, checked by json_body.py with the server's words.
Errors are `RequestError`s whose `param` (and `loc.file`) is the JSON path of the field, e.g.
`<request>:scoring.queries[2].options`; inside a template, line and column count within the template.
Other top-level keys (model, packs, stream, ...) are the server's and are not read here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import msgspec

from spinfc.errors import RequestError
from spinfc.frontend.fields import Fields, JsonWhere
from spinfc.frontend.json_body import convert_body
from spinfc.frontend.query import read_query
from spinfc.frontend.request_schema import ScoreRequest
from spinfc.frontend.content_parts import join, read_parts
from spinfc.ir.nodes import Content, MediaPiece, Program, Query

QUERY_SETS_REMEMBERED = 64  # the last query sets read, by their encoding (MessagePack: every float kept as it is)
QUERY_SET_BYTES = 256 * 1024  # a larger `scoring` is read every time (the remembered sets stay a few MB at most)
MESSAGE_EXAMPLE = '[{"role": "user", "content": "..."}]'


def program_from_request(body: Mapping[str, Any], model: str, source: str = "<request>") -> Program:
    """The program asking every query of `body` about each of its contents; raise `RequestError` (or
    `TemplateError`) at the first mistake. A body naming `packs` may have no queries of its own. The body's
    fields and types are checked first against `ScoreRequest`, as the server checks them (json_body.py)."""
    convert_body(body, ScoreRequest, source)
    f = Fields(body, (), JsonWhere(source), RequestError, "a JSON object")
    contents = _contents(f)
    scoring = body.get("scoring")
    # MessagePack, not JSON: JSON would write NaN and infinity (from a Python caller or a TOML file) as null, and the
    # remembered set would then be read with None where the body had NaN
    encoded = msgspec.msgpack.encode(scoring) if isinstance(scoring, dict) else b""
    if 0 < len(encoded) <= QUERY_SET_BYTES:  # read once per query set (a server sees one set request after request)
        queries = _queries_of(source, "packs" in body, encoded)
    else:
        queries = _queries(f)
    return Program(model=model, contents=contents, queries=queries)


@functools.lru_cache(maxsize=QUERY_SETS_REMEMBERED)
def _queries_of(source: str, packs: bool, scoring: bytes) -> tuple[Query, ...]:
    """`_queries` of a body whose `scoring` is this MessagePack (and that names `packs` or not): the queries, and any
    mistake in them, depend on nothing else (the same frozen values, the same JSON paths); a mistake raises and is
    not remembered."""
    body = {"scoring": msgspec.msgpack.decode(scoring), **({"packs": None} if packs else {})}
    return _queries(Fields(body, (), JsonWhere(source), RequestError, "a JSON object"))


def _contents(f: Fields) -> tuple[Content, ...]:
    if f.has("messages") and f.has("inputs"):
        f.fail(
            "inputs",
            "the body has both `messages` and `inputs`",
            code="conflicting_fields",
            hint="send one content as `messages`, or several as `inputs: [{messages: [...]}, ...]`",
        )
    if f.has("messages"):
        return (_content("input-0", f, "messages"),)
    if not f.has("inputs"):
        f.fail(
            None,
            "the body has no content: neither `messages` nor `inputs`",
            code="missing_content",
            hint=f'send the content as "messages": {MESSAGE_EXAMPLE}',
        )
    inputs = f.tables("inputs", "an object", '[{"messages": [...]}]')
    if not inputs:
        f.fail("inputs", "`inputs` is empty", code="empty_list", hint='give at least one: [{"messages": [...]}]')
    contents = []
    for i, item in enumerate(inputs):
        item.check_keys(("messages",))
        item.require("messages", "the input's messages", MESSAGE_EXAMPLE)
        contents.append(_content(f"input-{i}", item, "messages"))
    return tuple(contents)


def _content(content_id: str, f: Fields, key: str) -> Content:
    """The messages' texts joined with a blank line, and their media where their parts hold any
    (content_parts.py: image_url, input_audio, video_url, video)."""
    messages = f.tables(key, "a message object", '{"role": "user", "content": "..."}')
    if not messages:
        f.fail(key, f"`{key}` is empty", code="empty_list", hint=f"give at least one message: {MESSAGE_EXAMPLE}")
    pieces = []
    for m in messages:
        m.check_keys(("role", "content", "name"))
        m.string("role", "role", '"user"')
        content = m.value("content", (str, list), "message content", '"the text to score"')
        if isinstance(content, str):
            pieces.append(content)
        else:  # a message's text parts are joined with a blank line, like messages
            pieces.extend(read_parts(m))
    text, placed = join(pieces)
    return Content(content_id, text, media=tuple(MediaPiece(at, source) for at, source in placed))


def _queries(f: Fields) -> tuple[Query, ...]:
    scoring = f.table("scoring", "an object", '{"queries": [...]}', default=None)
    tables = (
        scoring.tables("queries", "a query object", '[{"id": "...", "template": "...", "options": [...]}]')
        if scoring
        else []
    )
    if not tables and not f.has("packs"):
        where = scoring if scoring is not None else f
        where.fail(
            "queries" if scoring is not None else None,
            "the request asks no question: `scoring.queries` is empty",
            code="no_queries",
            hint='add a query: {"id": "refund", "template": "...\\nAnswer:{?}", "options": [" yes", " no"]}',
        )
    queries: dict[str, Query] = {}
    for q in tables:
        query = read_query(q)
        if query.id in queries:
            q.fail(
                "id",
                f"query id {query.id!r} is used twice",
                code="duplicate_id",
                hint="give each query its own id; the answers are reported under it",
            )
        queries[query.id] = query
    return tuple(queries.values())
