"""Packs named in a request: their questions join the request's own in one program, so one read of each content
answers both; afterwards the results are split back and each pack's categories and decision are computed.

    {"messages": [...], "scoring": {"queries": [...]}, "packs": [{"id": "spinfc/moderation"}]}

A pack's queries keep their ids in the response; inside the program they are renamed `<pack id>/<query id>` (made
unique against the request's own ids), so two packs, or a pack and the request, may use the same query id.

Presentation: a pack's `presentation` wraps the content ("User message:\\n{content}"). One read can present the
content one way only, so the packs' presentation is applied when the request has no queries of its own and every
named pack has the same presentation (the usual case: one pack); the scores are then those `spinfc compile` gives
for the pack. Otherwise the content is read as the request sent it, for every query, and each pack's result says
`"presentation": "ignored"`: its thresholds were set on presented content, so put the presentation text into the
messages yourself if it matters.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from spinfc.errors import RequestError
from spinfc.frontend import Pack
from spinfc.ir.nodes import Program
from spinfc.runtime.deliver.pack_scores import score_pack
from spinfc.wire.results import QueryResult
from spinfc.wire.schemas import PackResult


@attrs.frozen
class PackSlice:
    pack: Pack
    ids: tuple[tuple[str, str], ...]  # (id in the program, the pack's query id), in the pack's order


@attrs.frozen
class WithPacks:
    program: Program
    own: tuple[str, ...]  # the request's own query ids, in order
    slices: tuple[PackSlice, ...]  # one per named pack, in request order
    presented: bool  # the packs' presentation wraps every content
    where: dict[str, str]  # query id in the program -> JSON path of where it came from (for limit errors)


def resolve_packs(registry, refs: Sequence[str]) -> list[Pack]:
    """The enabled packs `refs` names (ids, in request order); 400 pack_not_enabled or duplicate_pack."""
    packs, seen = [], set()
    for k, pack_id in enumerate(refs):
        if pack_id in seen:
            raise RequestError(f"pack {pack_id!r} is named twice", code="duplicate_pack", param=f"packs[{k}].id",
                               hint="name each pack once")
        seen.add(pack_id)
        packs.append(registry.require(pack_id, param=f"packs[{k}].id"))
    return packs


def add_packs(program: Program, packs: Sequence[Pack]) -> WithPacks:
    """`program` (a request's contents and own queries) also asking every query of `packs`."""
    own = tuple(query.id for query in program.queries)
    taken = set(own)
    where = {query_id: f"scoring.queries[{i}]" for i, query_id in enumerate(own)}
    queries, slices = list(program.queries), []
    for k, pack in enumerate(packs):
        ids = []
        for query in pack.queries:
            inner = f"{pack.id}/{query.id}"
            while inner in taken:
                inner += "~"
            taken.add(inner)
            ids.append((inner, query.id))
            where[inner] = f"packs[{k}]"
            queries.append(attrs.evolve(query, id=inner))
        slices.append(PackSlice(pack, tuple(ids)))
    shown = {(p.presentation_before, p.presentation_after) for p in packs}
    presented = bool(packs) and not own and len(shown) == 1
    before, after = shown.pop() if presented else ("", "")
    program = attrs.evolve(program, queries=tuple(queries), present_before=before, present_after=after)
    return WithPacks(program, own, tuple(slices), presented, where)


def split_results(results: list[QueryResult], plan: WithPacks) -> tuple[list[QueryResult], list[PackResult]]:
    """One content's results (the program's queries, in order) as (the request's own, one PackResult per pack)."""
    by_id = {result.id: result for result in results}
    own = [by_id[query_id] for query_id in plan.own]
    packs = []
    for piece in plan.slices:
        pack_results = [QueryResult(id=pack_id, combinations=by_id[inner].combinations) for inner, pack_id in piece.ids]
        p, floor = {}, {}
        for result in pack_results:
            for combination in result.combinations:
                if combination.options is None:  # an extraction question: categories count option questions only
                    continue
                key = (result.id, tuple(combination.values.items()))
                p[key] = {option.text: option.p for option in combination.options}
                floor[key] = {option.text: option.floor_p for option in combination.options}
        scores = score_pack(piece.pack, p, floor)
        packs.append(PackResult(
            id=piece.pack.id, version=piece.pack.version, presentation="applied" if plan.presented else "ignored",
            results=pack_results, categories=dict(scores.categories), decision=scores.label, rule=scores.rule,
            reason=scores.reason,
        ))
    return own, packs
