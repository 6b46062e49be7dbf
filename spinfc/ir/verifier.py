"""The IR verifier: every invariant the passes promise, checked on whatever stages a program has filled."""

from __future__ import annotations

from collections import Counter

from spinfc.ir.nodes import (
    AmountSlot, GenerateSlot, NumberSlot, OptionSlot, PassLayout, Program, TextSlot, preorder,
)

# the slot types a template's slot kind may have (`<*>` with `generate` set becomes a GenerateSlot)
SLOT_TYPES = {"options": (OptionSlot,), "text": (TextSlot, GenerateSlot), "number": (NumberSlot,),
              "amount": (AmountSlot,), "generate": (GenerateSlot,)}
SHOWN = 20  # problems shown per kind of check; the rest are counted


class IRVerifyError(Exception):
    """A program that breaks IR invariants; `problems` lists each one."""

    def __init__(self, problems: list[str], after: str | None = None) -> None:
        self.problems = problems
        where = f" after pass {after!r}" if after else ""
        super().__init__(f"IR invalid{where}: {len(problems)} problem(s)\n" + "\n".join(f"  - {p}" for p in problems))


def verify(program: Program, after: str | None = None) -> Program:
    """Check `program`; return it unchanged, or raise `IRVerifyError` listing every broken invariant."""
    problems: list[str] = []
    for check in (_program, _contents, _queries, _questions, _tokens, _trie, _segments, _plan, _layouts):
        found = list(check(program))
        problems += found[:SHOWN] + ([f"... and {len(found) - SHOWN} more like these"] if len(found) > SHOWN else [])
    if problems:
        raise IRVerifyError(problems, after)
    return program


def _program(p: Program):
    if p.block < 1 or p.budget < p.block or p.budget % p.block:
        yield f"budget {p.budget} is not a positive multiple of block {p.block}"


def _contents(p: Program):
    for cid, count in Counter(c.id for c in p.contents).items():
        if count > 1:
            yield f"content id {cid!r} is used {count} times"
    floors = [c for c in p.contents if c.is_floor]
    if len(floors) > 1:
        yield f"{len(floors)} contents are marked as the floor; at most one may be"
    for c in floors:
        if c.text:
            yield f"the floor content {c.id!r} has text; it must be empty"


def _queries(p: Program):
    for qid, count in Counter(q.id for q in p.queries).items():
        if count > 1:
            yield f"query id {qid!r} is used {count} times"
    for q in p.queries:
        slot = q.template.slot
        if slot is None:
            yield f"query {q.id!r}: template has no slot"
        elif not isinstance(q.slot, SLOT_TYPES[slot.kind]):
            yield f"query {q.id!r}: template slot is {slot.kind!r} but the slot is {type(q.slot).__name__}"
        given = dict(q.placeholders)
        for name in q.template.placeholders:
            if not given.get(name):
                yield f"query {q.id!r}: placeholder {name!r} has no values"
        if isinstance(q.slot, OptionSlot):
            texts = [o.text for o in q.slot.options]
            if not texts and not q.slot.codes:  # codes = "all": every code of the model, filled in by tokenize
                yield f"query {q.id!r}: option slot without options"
            if any(not t for t in texts):
                yield f"query {q.id!r}: an option is empty"
            if len(set(texts)) != len(texts):
                yield f"query {q.id!r}: duplicated options {sorted(t for t, n in Counter(texts).items() if n > 1)}"


def _questions(p: Program):
    queries = {q.id: q for q in p.queries}
    for i, question in enumerate(p.questions):
        query = queries.get(question.query_id)
        if query is None:
            yield f"question {i}: unknown query {question.query_id!r}"
            continue
        names = tuple(name for name, _ in question.values)
        used = set(query.template.placeholders)
        want = tuple(name for name, _ in query.placeholders if name in used)
        if names != want or set(names) != used:
            yield f"question {i}: values name {names}, the template's placeholders are {query.template.placeholders}"
        given = dict(query.placeholders)
        for name, value in question.values:
            if value not in given.get(name, ()):
                yield f"question {i}: {name}={value!r} is not one of the query's values"
        if type(question.slot) is not type(query.slot):
            yield f"question {i}: slot {type(question.slot).__name__} differs from its query's"
        elif isinstance(query.slot, OptionSlot):
            if question.slot.codes != query.slot.codes:
                yield f"question {i}: reads codes where its query does not, or the other way round"
            elif query.slot.options and [o.text for o in question.slot.options] != [o.text for o in query.slot.options]:
                yield f"question {i}: options differ from its query's"


def _tokens(p: Program):
    tokenized = p.trie is not None or any(c.tokens for c in p.contents) or any(q.tokens for q in p.questions)
    if not tokenized:
        return
    for c in p.contents:
        if any(not isinstance(t, int) or t < 0 for t in c.tokens):
            yield f"content {c.id!r}: token ids must be non-negative integers"
    for i, q in enumerate(p.questions):
        if not q.tokens:
            yield f"question {i} ({q.query_id!r}): no prompt tokens after tokenize"
        if any(not isinstance(t, int) or t < 0 for t in q.tokens):
            yield f"question {i}: token ids must be non-negative integers"
        if isinstance(q.slot, OptionSlot):
            if q.slot.codes and not q.slot.options:
                yield f"question {i} ({q.query_id!r}): reads no codes after tokenize"
            for j, o in enumerate(q.slot.options):
                if not o.tokens:
                    yield f"question {i} option {j} ({o.text!r}): no tokens after tokenize"
                elif q.slot.codes and len(o.tokens) != 1:
                    yield f"question {i} code {j} ({o.text!r}): a code is one read of the head, not {len(o.tokens)}"


def _wanted_reads(p: Program) -> dict[tuple[int, int, int], int]:
    """(question, option, step) -> token, for every step of every option."""
    return {
        (i, j, k): t
        for i, q in enumerate(p.questions) if isinstance(q.slot, OptionSlot)
        for j, o in enumerate(q.slot.options) for k, t in enumerate(o.tokens)
    }


def _trie(p: Program):
    if p.trie is None:
        return
    rows = preorder(p.trie)
    paths: list[tuple[int, ...]] = []
    for row in rows:
        paths.append((paths[row.parent] if row.parent >= 0 else ()) + (row.node.token,))
    for label, siblings in [("roots", p.trie)] + [(f"children of path {paths[i]}", r.node.children)
                                                   for i, r in enumerate(rows)]:
        tokens = [n.token for n in siblings]
        if len(set(tokens)) != len(tokens):
            yield f"trie: {label} repeat a token (prefixes not merged)"
    wanted, seen, prompts = _wanted_reads(p), Counter(), Counter()
    for i, row in enumerate(rows):
        for r in row.node.reads:
            key = (r.question, r.option, r.step)
            seen[key] += 1
            if key not in wanted:
                yield f"trie: read {key} at path {paths[i]} names no question/option/step"
                continue
            expect = p.questions[r.question].tokens + p.questions[r.question].slot.options[r.option].tokens[:r.step]
            if r.token != wanted[key]:
                yield f"trie: read {key} scores token {r.token}, the option's token is {wanted[key]}"
            if paths[i] != expect:
                yield f"trie: read {key} sits at path {paths[i]}, it belongs at {expect}"
        for q in row.node.prompts:
            prompts[q] += 1
            if not 0 <= q < len(p.questions) or paths[i] != p.questions[q].tokens:
                yield f"trie: prompt end of question {q} at path {paths[i]} is not that question's prompt"
    for key in wanted:
        if seen[key] != 1:
            yield f"trie: read {key} (question, option, step) appears {seen[key]} times, not once"
    for q in range(len(p.questions)):
        if prompts[q] != 1:
            yield f"trie: the prompt end of question {q} appears {prompts[q]} times, not once"


def _segments(p: Program):
    if p.segments is None:
        return
    if [s.content for s in p.segments] != list(range(len(p.contents))):
        yield f"segments: one per content in content order is required, got {[s.content for s in p.segments]}"
        return
    tree = len(preorder(p.trie))
    for s in p.segments:
        content = p.contents[s.content].tokens
        if s.length != len(content) + tree or s.tokens[:len(content)] != content:
            yield f"segment {s.content}: {s.length} rows, not content {s.content}'s {len(content)} tokens + tree {tree}"
        if not len(s.positions) == len(s.ends) == s.length:
            yield f"segment {s.content}: positions/ends lengths {len(s.positions)}/{len(s.ends)}, not {s.length}"
        if any(not j < end <= s.length for j, end in enumerate(s.ends)):
            yield f"segment {s.content}: an end reaches outside the segment"
        if any(not 0 <= r.row < s.length or r.content != s.content for r in (*s.reads, *s.prompt_rows)):
            yield f"segment {s.content}: a read or prompt row lies outside it or names another content"


def _plan(p: Program):
    plan = p.plan
    if plan is None:
        return
    if (plan.budget, plan.block) != (p.budget, p.block):
        yield f"plan: budget/block {plan.budget}/{plan.block} differ from the program's {p.budget}/{p.block}"
    tree = len(preorder(p.trie))
    placed = Counter()
    for k, pss in enumerate(plan.passes):
        if pss.index != k:
            yield f"plan: pass {k} has index {pss.index}"
        for pl in pss.placements:
            placed[pl.content] += 1
            if not 0 <= pl.content < len(p.contents):
                yield f"plan: pass {k} places unknown content {pl.content}"
                continue
            if pl.length != len(p.contents[pl.content].tokens) + tree:
                yield f"plan: content {pl.content} has length {pl.length}, its tokens + tree are " \
                      f"{len(p.contents[pl.content].tokens) + tree}"
            if pl.start % plan.block or pl.start < 0:
                yield f"plan: content {pl.content} starts at {pl.start}, not a block multiple"
            alone = len(pss.placements) == 1 and pl.start == 0  # a content alone may pass the budget (the CPU)
            if pl.start + pl.length > plan.budget and not alone:
                yield f"plan: content {pl.content} ends at {pl.start + pl.length}, past the budget {plan.budget}"
        spans = sorted((pl.start, pl.start + pl.length, pl.content) for pl in pss.placements if pl.length)
        for (a0, a1, ca), (b0, b1, cb) in zip(spans, spans[1:]):
            if b0 < a1:
                yield f"plan: pass {k}: contents {ca} [{a0}, {a1}) and {cb} [{b0}, {b1}) overlap"
    for c in range(len(p.contents)):
        if placed[c] != 1:
            yield f"plan: content {c} is placed {placed[c]} times, not once"


def _layouts(p: Program):
    if p.layouts is None:
        return
    if p.plan is None or len(p.layouts) != len(p.plan.passes):
        yield "layouts: one per pass of the plan is required"
        return
    wanted = {(c, *key): t for c in range(len(p.contents)) for key, t in _wanted_reads(p).items()}
    seen, prompts = Counter(), Counter()
    for pss, lay in zip(p.plan.passes, p.layouts):
        yield from _layout(p, pss, lay, wanted, seen, prompts)
    for key in wanted:
        if seen[key] != 1:
            yield f"layouts: read {key} (content, question, option, step) appears {seen[key]} times, not once"
    for c in range(len(p.contents)):
        for q in range(len(p.questions)):
            if prompts[c, q] != 1:
                yield f"layouts: prompt row of content {c} question {q} appears {prompts[c, q]} times, not once"


def _layout(p: Program, pss, lay: PassLayout, wanted: dict, seen: Counter, prompts: Counter):
    T, name = lay.budget, f"layout {lay.index}"
    alone = len(pss.placements) == 1  # a content alone: its pass may be longer than the budget (Shapes.largest)
    if lay.index != pss.index or (T > p.plan.budget and not alone) or T % p.plan.block:  # T < budget: trimmed
        yield f"{name}: index/budget {lay.index}/{T} differ from pass {pss.index}/{p.plan.budget}"
    if not len(lay.tokens) == len(lay.positions) == len(lay.ends) == T:
        yield f"{name}: tokens/positions/ends lengths {len(lay.tokens)}/{len(lay.positions)}/{len(lay.ends)}, not {T}"
        return
    if lay.spans != tuple((pl.start, pl.start + pl.length) for pl in pss.placements):
        yield f"{name}: spans {lay.spans} differ from the pass's placements"
        return
    owner = [-1] * T  # [T] placement index of each row, -1 for padding
    parent = [-1] * T  # [T] the row each row continues (-1: a sequence's first row)
    for n, pl in enumerate(pss.placements):
        start, stop, content = pl.start, pl.start + pl.length, p.contents[pl.content].tokens
        if tuple(lay.tokens[start:start + len(content)]) != content:
            yield f"{name}: rows [{start}, {start + len(content)}) do not hold content {pl.content}'s tokens"
        stack: list[int] = []  # open rows whose subtree contains the current row
        for i in range(start, stop):
            owner[i] = n
            if not i < lay.ends[i] <= stop:
                yield f"{name}: row {i} has end {lay.ends[i]}, outside ({i}, {stop}] of its span"
            while stack and lay.ends[stack[-1]] <= i:
                stack.pop()
            if stack and lay.ends[i] > lay.ends[stack[-1]]:
                yield f"{name}: row {i}'s subtree (to {lay.ends[i]}) leaves its parent row {stack[-1]}'s"
            parent[i] = stack[-1] if stack else -1
            want = lay.positions[parent[i]] + 1 if stack else 0
            if lay.positions[i] != want:
                yield f"{name}: row {i} has position {lay.positions[i]}, its depth is {want}"
            if i - start < len(content) and lay.ends[i] != stop:
                yield f"{name}: content row {i} ends at {lay.ends[i]}, not the span stop {stop}"
            stack.append(i)
    for i in range(T):
        if owner[i] < 0 and (lay.tokens[i], lay.positions[i], lay.ends[i]) != (p.pad, 0, i + 1):
            yield f"{name}: padding row {i} is not (pad {p.pad}, position 0, end {i + 1})"

    def sequence(row: int) -> tuple[int, ...]:
        out = []
        while row >= 0:
            out.append(lay.tokens[row])
            row = parent[row]
        return tuple(reversed(out))

    for r in lay.reads:
        key = (r.content, r.question, r.option, r.step)
        seen[key] += 1
        if not 0 <= r.row < T or owner[r.row] < 0 or pss.placements[owner[r.row]].content != r.content:
            yield f"{name}: read {key} at row {r.row}, outside content {r.content}'s span"
        elif key not in wanted or r.token != wanted[key]:
            yield f"{name}: read {key} scores token {r.token}, not an option step's token"
        else:
            q = p.questions[r.question]
            expect = p.contents[r.content].tokens + q.tokens + q.slot.options[r.option].tokens[:r.step]
            if sequence(r.row) != expect:
                yield f"{name}: read {key} at row {r.row} does not see the content, prompt and option prefix"
    contents_read = [(c.content, c.position, c.row) for c in lay.content_rows]
    placed = [(pl.content, k, pl.start + k) for pl in pss.placements
              for k in range(len(p.contents[pl.content].tokens))] if p.read_contents else []
    if contents_read != placed:
        yield f"{name}: content rows {contents_read[:3]}... are not every content row in row order" \
            if p.read_contents else f"{name}: content rows listed, but the program does not read its contents"
    for pr in lay.prompt_rows:
        prompts[pr.content, pr.question] += 1
        ok = 0 <= pr.row < T and owner[pr.row] >= 0 and pss.placements[owner[pr.row]].content == pr.content
        if not ok or not 0 <= pr.question < len(p.questions) or \
                sequence(pr.row) != p.contents[pr.content].tokens + p.questions[pr.question].tokens:
            yield f"{name}: prompt row {pr.row} of content {pr.content} question {pr.question} is not its prompt's end"
