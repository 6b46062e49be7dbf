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
from typing import Any, NoReturn

import msgspec

from spinfc.errors import RequestError
from spinfc.frontend.fields import Fields, JsonWhere
from spinfc.frontend.json_body import convert_body
from spinfc.frontend.query import read_query
from spinfc.frontend.request_schema import Message, ScoreRequest
from spinfc.frontend.content_parts import join, read_parts
from spinfc.ir.nodes import Content, MediaPiece, Program, Query

QUERY_SETS_REMEMBERED = 64  # the last query sets read, by their encoding (MessagePack: every float kept as it is)
QUERY_SET_BYTES = 256 * 1024  # a larger `scoring` is read every time (the remembered sets stay a few MB at most)
MESSAGE_EXAMPLE = '[{"role": "user", "content": "..."}]'


def program_from_request(request: ScoreRequest | Mapping[str, Any], model: str, source: str = "<request>") -> Program:
    """The program asking every query of `request` about each of its contents; raise `RequestError` (or
    `TemplateError`) at the first mistake. A request naming `packs` may have no queries of its own. `request` is
    the decoded struct (the server's, decoded once at the boundary), or a plain body (a JSON file, a Python caller),
    checked first against `ScoreRequest` as the server checks one (json_body.py). A `null` field is an absent one."""
    if not isinstance(request, ScoreRequest):
        request = convert_body(request, ScoreRequest, source)
    where = JsonWhere(source)
    contents = _contents(request, where)
    # the query set as MessagePack, not JSON: JSON would write NaN and infinity (from a Python caller or a TOML
    # file) as null, and the remembered set would then be read with None where the body had NaN
    encoded = msgspec.msgpack.encode(request.scoring) if request.scoring is not None else b""
    packs = request.packs is not None
    if len(encoded) <= QUERY_SET_BYTES:  # read once per query set (a server sees one set request after request)
        queries = _queries_of(source, packs, encoded)
    else:
        queries = _read_queries(source, packs, encoded)
    return Program(model=model, contents=contents, queries=queries)


def _read_queries(source: str, packs: bool, scoring: bytes) -> tuple[Query, ...]:
    """The queries of a `scoring` given as MessagePack (empty: no `scoring`), read by query.py's walk: the one
    reader of a query, a request's as a pack's (TOML). `packs`: the request names packs (it may ask none of its own)."""
    body = {"scoring": msgspec.msgpack.decode(scoring)} if scoring else {}
    if packs:
        body["packs"] = None
    return _queries(Fields(body, (), JsonWhere(source), RequestError, "a JSON object"))


@functools.lru_cache(maxsize=QUERY_SETS_REMEMBERED)
def _queries_of(source: str, packs: bool, scoring: bytes) -> tuple[Query, ...]:
    """`_read_queries`, remembered: the queries, and any mistake in them, depend on nothing else (the same frozen
    values, the same JSON paths); a mistake raises and is not remembered."""
    return _read_queries(source, packs, scoring)


def _fail(where: JsonWhere, path: tuple, message: str, *, code: str, hint: str) -> NoReturn:
    """The `RequestError` at `path` (a JSON path as keys and indices), as the `Fields` walk words one."""
    Fields({}, (), where, RequestError, "a JSON object").fail(path or None, message, code=code, hint=hint)


def _contents(request: ScoreRequest, where: JsonWhere) -> tuple[Content, ...]:
    """The request's contents, `input-0`, `input-1`, ...: read on the typed struct (types and keys were checked
    when it was decoded); what remains to check is what the schema cannot say."""
    if request.messages is not None and request.inputs is not None:
        _fail(where, ("inputs",), "the body has both `messages` and `inputs`", code="conflicting_fields",
              hint="send one content as `messages`, or several as `inputs: [{messages: [...]}, ...]`")
    if request.messages is not None:
        return (_content("input-0", request.messages, ("messages",), where),)
    if request.inputs is None:
        _fail(where, (), "the body has no content: neither `messages` nor `inputs`", code="missing_content",
              hint=f'send the content as "messages": {MESSAGE_EXAMPLE}')
    if not request.inputs:
        _fail(where, ("inputs",), "`inputs` is empty", code="empty_list", hint='give at least one: [{"messages": [...]}]')
    return tuple(_content(f"input-{i}", item.messages, ("inputs", i, "messages"), where)
                 for i, item in enumerate(request.inputs))


def _content(content_id: str, messages: list[Message], path: tuple, where: JsonWhere) -> Content:
    """The messages' texts joined with a blank line, and their media where their parts hold any
    (content_parts.py: image_url, input_audio, video_url, video)."""
    if not messages:
        key = path[-1]
        _fail(where, path, f"`{key}` is empty", code="empty_list", hint=f"give at least one message: {MESSAGE_EXAMPLE}")
    pieces = []
    for j, m in enumerate(messages):
        if isinstance(m.content, str):
            pieces.append(m.content)
        else:  # a message's text parts are joined with a blank line, like messages; its media read by content_parts
            pieces.extend(read_parts(Fields(msgspec.to_builtins(m), path + (j,), where, RequestError)))
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
