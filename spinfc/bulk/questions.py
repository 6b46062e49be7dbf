"""The questions of a bulk job: the `--queries` file (the `scoring.queries` of a /v1/score request) and the packs
named by `--pack` (a bundled pack id such as `spinfc/support-triage`, or a `.toml` file).

Everything is read and checked here, before any model is loaded: a query or a pack with a mistake stops the job
with the frontend's error (file:line:col or JSON path, and a hint).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import attrs

from spinfc.bulk.errors import BulkError
from spinfc.frontend import Pack, load_pack, program_from_request
from spinfc.ir.nodes import Query
from spinfc.packsrc import load_pack_registry
from spinfc.registry import base_model, resolve


@attrs.frozen
class QuestionSet:
    queries: tuple[dict, ...]  # the request's own queries as JSON, as the file gave them (sent to a server as is)
    own: tuple[Query, ...]  # the same, parsed by the frontend
    packs: tuple[Pack, ...]  # in the order of --pack
    model: str  # the served name of the model the questions were checked against
    codes: tuple[str, ...] = ()  # a decision model's codes, where a question reads every one (`codes = "all"`)


def load_questions(pack_refs: Sequence[str], queries_file: str | None, model: str) -> QuestionSet:
    """Read `queries_file` (a JSON list of queries, `{"queries": [...]}` or a whole /v1/score body) and resolve
    `pack_refs`; raise BulkError (or the frontend's CompileError) for anything that cannot be asked."""
    served = resolve(model).name
    queries = _read_queries(queries_file) if queries_file else []
    if not queries and not pack_refs:
        raise BulkError("no questions: give --pack ID_OR_FILE (e.g. --pack spinfc/support-triage) and/or "
                        "--queries FILE (a JSON list of /v1/score queries)")
    own: tuple[Query, ...] = ()
    if queries:
        body = {"messages": [{"role": "user", "content": "-"}], "scoring": {"queries": queries}}
        own = program_from_request(body, model=served, source=str(queries_file)).queries
    packs = _resolve_packs(pack_refs, served)
    every = [q for q in (*own, *(q for pack in packs for q in pack.queries)) if getattr(q.slot, "codes", False)
             and not q.slot.options]
    codes = _model_codes(model) if every else ()  # the columns of `codes = "all"` are the model's codes
    return QuestionSet(tuple(queries), own, tuple(packs), served, codes)


def _model_codes(model: str) -> tuple[str, ...]:
    from spinfc.runtime.models.families import codes_of_model  # torch: `spinfc score --server` needs none

    codes = codes_of_model(model)
    if not codes:
        raise BulkError(f"a question reads codes = \"all\", and {model!r} is not a decision model (its head reads its "
                        "vocabulary): give options instead, or --model a decision model")
    return codes


def _read_queries(path: str) -> list:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BulkError(f"--queries {path}: no such file") from None
    except json.JSONDecodeError as error:
        raise BulkError(f"{path}:{error.lineno}:{error.colno}: error: not valid JSON: {error.msg}") from None
    if isinstance(data, dict):
        scoring = data.get("scoring", data)
        data = scoring.get("queries") if isinstance(scoring, dict) else None
    if not isinstance(data, list):
        raise BulkError(f"{path}: expected a JSON list of queries, {{\"queries\": [...]}} or a /v1/score body with "
                        "scoring.queries, e.g. [{\"id\": \"refund\", \"template\": \"...Answer:<?>\", "
                        "\"options\": [\" yes\", \" no\"]}]")
    return data


def _resolve_packs(refs: Sequence[str], model: str) -> list[Pack]:
    packs, registry = [], None
    for ref in refs:
        if ref.endswith(".toml") or Path(ref).is_file():
            if not Path(ref).is_file():
                raise BulkError(f"--pack {ref}: no such file")
            pack = load_pack(ref)
        else:
            if registry is None:
                registry = load_pack_registry([], base_model(model))  # a quantized checkpoint: its base's packs
            if registry.get(ref) is None:
                why = next((s.reason for s in registry.skipped if s.id == ref), None)
                known = ", ".join(registry.enabled) or "none"
                raise BulkError(f"--pack {ref}: no bundled pack with that id for {model}" + (f" ({why})" if why else "")
                                + f"; the bundled packs are {known}, or give a .toml file")
            pack = registry.get(ref)
        if any(p.id == pack.id for p in packs):
            raise BulkError(f"--pack {ref}: pack {pack.id!r} is named twice; name each pack once")
        packs.append(pack)
    return packs
