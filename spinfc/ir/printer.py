"""The IR as stable, readable text: what `spinfc compile --emit` prints and what the snapshot tests store.

Only the stages a program has filled are printed. Token ids are shown with their text when a tokenizer is given.
Long things are summarised, never dropped silently: content token lists are elided in the middle, the trie
prints one line per chain of single-child nodes, and a pass layout prints runs of rows (a run continues while
positions step by one and `end` stays the same: a content, or one branch of the trie) instead of 16k rows.
"""

from __future__ import annotations

from spinfc.ir.decode_plan import decode_plan
from spinfc.ir.nodes import OptionSlot, PassLayout, Program, Question, preorder

CONTENT_IDS_SHOWN = 12  # content tokens printed at each end before eliding the middle
TEXT_SHOWN = 72  # characters of content text printed


def print_ir(program: Program, tokenizer=None) -> str:
    """The program's filled stages as text; the same program always prints the same text."""
    out = _Writer(tokenizer)
    out.line(f"program model={program.model} budget={program.budget} block={program.block} pad={program.pad}")
    if program.present_before or program.present_after:
        out.line(f"presentation before={program.present_before!r} after={program.present_after!r}")
    _contents(out, program)
    _queries(out, program)
    if program.questions:
        _questions(out, program)
    if program.trie is not None:
        _trie(out, program)
    if program.segments is not None:
        _segments(out, program)
    if program.plan is not None:
        _plan(out, program)
    if program.layouts is not None:
        for layout in program.layouts:
            _layout(out, program, layout)
    if program.stats:
        out.line("stats " + " ".join(f"{k}={v}" for k, v in program.stats))
    return "\n".join(out.lines) + "\n"


class _Writer:
    def __init__(self, tokenizer) -> None:
        self.lines: list[str] = []
        self.tokenizer = tokenizer
        self.tree_shape: tuple[tuple, int] | None = None  # the last tree printed in full: (its shape, its content)

    def line(self, text: str, indent: int = 0) -> None:
        self.lines.append("  " * indent + text)

    def ids(self, tokens) -> str:
        """Token ids, each followed by its text when there is a tokenizer: `108 '\\n\\n' 7925 'Answer'`."""
        if self.tokenizer is None:
            return " ".join(map(str, tokens))
        return " ".join(f"{t} {self.tokenizer.decode([t])!r}" for t in tokens)

    def text(self, tokens) -> str:
        return f" {self.tokenizer.decode(list(tokens))!r}" if self.tokenizer is not None and tokens else ""


def _clip(text: str) -> str:
    return repr(text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN] + "…")


def _contents(out: _Writer, p: Program) -> None:
    out.line(f"contents ({len(p.contents)})")
    tokenized = any(c.tokens for c in p.contents) or any(q.tokens for q in p.questions)
    for i, c in enumerate(p.contents):
        floor = " floor" if c.is_floor else ""
        count = f" tokens={len(c.tokens)}" if tokenized else ""
        out.line(f"c{i} {c.id!r}{floor} text={_clip(c.text)}{count}", 1)
        if c.tokens:
            n = CONTENT_IDS_SHOWN
            if len(c.tokens) <= 2 * n:
                out.line(out.ids(c.tokens), 2)
            else:
                out.line(f"{out.ids(c.tokens[:n])} … ({len(c.tokens) - 2 * n} more) … {out.ids(c.tokens[-n:])}", 2)


def _queries(out: _Writer, p: Program) -> None:
    out.line(f"queries ({len(p.queries)})")
    for q in p.queries:
        out.line(f"{q.id} {_slot(q.slot)} template={q.template.source!r} at {q.template.loc}", 1)
        for name, values in q.placeholders:
            out.line(f"{{{name}}} = {' | '.join(map(repr, values))}", 2)


def _slot(slot) -> str:
    if isinstance(slot, OptionSlot) and slot.codes:
        return "codes[" + (", ".join(repr(o.text) for o in slot.options) or "all") + "]"
    if isinstance(slot, OptionSlot):
        return "options[" + ", ".join(repr(o.text) for o in slot.options) + "]"
    kind = type(slot).__name__.removesuffix("Slot").lower()
    search = f", beam_width={slot.beam_width}" if hasattr(slot, "beam_width") else \
        f", temperature={slot.temperature}" + (f", seed={slot.seed}" if slot.seed is not None else "")
    lead = f", lead={slot.lead!r}" if getattr(slot, "lead", "") else ""
    free = ", free" if getattr(slot, "free", False) else ""
    return f"{kind}(stop={slot.stop!r}, max_tokens={slot.max_tokens}{search}{lead}{free})"


def _question_name(i: int, q: Question) -> str:
    values = ",".join(f"{k}={v}" for k, v in q.values)
    return f"q{i} {q.query_id}" + (f"[{values}]" if values else "")


def _questions(out: _Writer, p: Program) -> None:
    out.line(f"questions ({len(p.questions)})")
    for i, q in enumerate(p.questions):
        out.line(f"{_question_name(i, q)} prompt={q.prompt!r} {_slot(q.slot)}", 1)
        if q.tokens:
            out.line(f"prompt tokens ({len(q.tokens)}): {out.ids(q.tokens)}", 2)
        if isinstance(q.slot, OptionSlot) and any(o.tokens for o in q.slot.options):
            for j, o in enumerate(q.slot.options):
                if q.slot.codes:  # a code's one "token" is its row of the decision head, not a vocabulary entry
                    out.line(f"code {j} {o.text!r}: head row {o.tokens[0]}", 2)
                else:
                    out.line(f"option {j} {o.text!r} tokens ({len(o.tokens)}): {out.ids(o.tokens)}", 2)


def _trie(out: _Writer, p: Program) -> None:
    rows = preorder(p.trie)
    out.line(f"trie ({len(rows)} nodes, {p.stat('tree_tokens_before')} tokens before dedupe)")
    depth_of_line = {}  # trie row -> indent of the line that prints it
    chain: list[int] = []

    def flush() -> None:
        if not chain:
            return
        indent = 1 + (depth_of_line[rows[chain[0]].parent] + 1 if rows[chain[0]].parent >= 0 else 0)
        for k in chain:
            depth_of_line[k] = indent - 1
        tokens = [rows[k].node.token for k in chain]
        out.line(f"{' '.join(map(str, tokens))}{out.text(tokens)}  @{rows[chain[0]].depth}", indent)
        last = rows[chain[-1]].node
        for q in last.prompts:
            out.line(f"prompt end: {_question_name(q, p.questions[q])}", indent + 1)
        for r in last.reads:
            slot = p.questions[r.question].slot
            option, read = slot.options[r.option].text, f"head row {r.token}" if slot.codes else out.ids([r.token])
            out.line(f"read q{r.question} {'code' if slot.codes else 'option'} {r.option} {option!r} step {r.step} "
                     f"-> {read}", indent + 1)
        chain.clear()

    for k, row in enumerate(rows):
        # a node continues the chain when it is the only child of a node that has nothing to print
        previous = rows[chain[-1]].node if chain else None
        continues = previous is not None and row.parent == chain[-1] and len(previous.children) == 1 \
            and not previous.reads and not previous.prompts
        if not continues:
            flush()
        chain.append(k)
    flush()


def _segments(out: _Writer, p: Program) -> None:
    tree = len(preorder(p.trie))
    out.line(f"segments ({len(p.segments)}: each content with its {tree}-row question tree, rows from 0)")
    for s in p.segments:
        c = p.contents[s.content]
        out.line(f"segment c{s.content} {c.id!r}: {s.length} rows ({len(c.tokens)} content + {tree} tree), "
                 f"{s.rows} answer rows, {len(s.reads)} reads, {len(s.prompt_rows)} prompt rows", 1)


def _plan(out: _Writer, p: Program) -> None:
    plan = p.plan
    used = sum(pss.used for pss in plan.passes)
    # a content alone that is longer than the budget takes a pass of its own length, rounded up to the block
    rows = [max(plan.budget, -(-pss.used // plan.block) * plan.block) for pss in plan.passes]
    total = sum(rows)
    out.line(f"plan ({_count(len(plan.passes), 'pass', 'passes')} of {plan.budget} rows, block {plan.block}, "
             f"{used} rows used of {total}: {_percent(used, total)} full)")
    tree = len(preorder(p.trie))
    for pss, size in zip(plan.passes, rows):
        alone = f", alone in a pass of {size} rows (longer than the budget)" if size > plan.budget else ""
        out.line(f"pass {pss.index}: {_count(len(pss.placements), 'content', 'contents')}, {pss.used} rows "
                 f"({_percent(pss.used, size)}){alone}", 1)
        for pl in pss.placements:
            c = p.contents[pl.content]
            out.line(f"[{pl.start}, {pl.start + pl.length}) c{pl.content} {c.id!r}: "
                     f"{len(c.tokens)} content + {tree} tree tokens", 2)
    baseline = one_sequence_per_question(p)
    out.line(f"tokens processed: {used} (each content once + its question tree; padding not counted)")
    out.line(f"one sequence per question: {baseline} (per content and question: content + prompt + each "
             f"option's tokens but its last)")
    if used:
        out.line(f"saving: {baseline / used:.2f}x fewer tokens than one sequence per question")


def one_sequence_per_question(p: Program) -> int:
    """Tokens a one-sequence-per-question run reads for this program: for every content and question, the
    content, the prompt, and each option's tokens but its last (the last is scored, never read)."""
    per_content = sum(
        len(q.tokens) + (sum(len(o.tokens) - 1 for o in q.slot.options) if isinstance(q.slot, OptionSlot) else 0)
        for q in p.questions
    )
    return sum(len(c.tokens) * len(p.questions) + per_content for c in p.contents)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _percent(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "n/a"


def _layout(out: _Writer, p: Program, lay: PassLayout) -> None:
    """Spans and padding in row order. Within a span: the content's run, then the tree's runs (a run continues
    while positions step by one and `end` stays the same: one branch). A tree laid out exactly like the first one
    printed (ends and positions equal relative to its first row) is printed as one line saying so."""
    answer_rows = len({r.row for r in lay.reads})
    out.line(f"layout pass {lay.index}: {lay.budget} rows, {len(lay.spans)} spans, {len(lay.reads)} reads "
             f"on {answer_rows} answer rows, {len(lay.prompt_rows)} prompt rows"
             + (f", {len(lay.content_rows)} content rows read" if lay.content_rows else ""))
    contents = {pl.start: pl.content for pl in p.plan.passes[lay.index].placements}
    at = 0
    for start, stop in lay.spans:
        if start > at:
            _padding(out, lay, at, start)
        c = contents[start]
        tree = start + len(p.contents[c].tokens)
        out.line(f"[{start}, {stop}) span c{c} {p.contents[c].id!r}", 1)
        if tree > start:
            out.line(f"[{start}, {tree}) content positions 0..{tree - start - 1} end={lay.ends[start]}", 2)
        shape = tuple((lay.ends[i] - tree, lay.positions[i] - (tree - start)) for i in range(tree, stop))
        if shape and out.tree_shape is not None and shape == out.tree_shape[0]:
            out.line(f"[{tree}, {stop}) tree laid out as c{out.tree_shape[1]}'s ({len(shape)} rows, same ends and "
                     f"positions relative to its first row)", 2)
        else:
            out.tree_shape = (shape, c)
            run = tree
            for i in range(tree + 1, stop + 1):
                if i < stop and lay.positions[i] == lay.positions[i - 1] + 1 and lay.ends[i] == lay.ends[i - 1]:
                    continue
                out.line(f"[{run}, {i}) tree positions {lay.positions[run]}..{lay.positions[i - 1]} "
                         f"end={lay.ends[run]}", 2)
                run = i
        at = max(at, stop)
    if at < lay.budget:
        _padding(out, lay, at, lay.budget)
    _decode_plan(out, p, lay)


def _decode_plan(out: _Writer, p: Program, lay: PassLayout) -> None:
    """The extraction questions of the pass: where each decodes from and how (ir/decode_plan.py)."""
    plan = decode_plan(p, lay)
    decoded = [s for s in plan if not p.contents[s.content].is_floor]
    if not decoded:
        return
    out.line(f"decode plan pass {lay.index}: {_count(len(decoded), 'slot', 'slots')} decoded from the pass's keys and "
             f"values", 1)
    out.line(f"one batch of at most {sum(s.beams for s in decoded)} beams a step, at most "
             f"{max(s.max_tokens for s in decoded)} steps, then each searched answer read on the floor", 2)
    for s in plan:
        name = _question_name(s.question, p.questions[s.question])
        if p.contents[s.content].is_floor:
            if s.kind != "generate":
                out.line(f"row {s.row} c{s.content} (floor) {name}: its context kept (sees {s.sees} rows); the "
                         "contents' answers are read from here for floor_p", 2)
            continue
        out.line(f"row {s.row} c{s.content} {name}: {s.kind}, "
                 f"{s.beams} beams, <= {s.max_tokens} tokens, from position {s.position + 1}, sees {s.sees} rows; "
                 f"{s.grammar}", 2)


def _padding(out: _Writer, lay: PassLayout, start: int, stop: int) -> None:
    """One line for a stretch of padding rows, saying whether each holds (pad, position 0, end row + 1)."""
    regular = all(lay.positions[i] == 0 and lay.ends[i] == i + 1 and lay.tokens[i] == lay.tokens[start]
                  for i in range(start, stop))
    what = f"token={lay.tokens[start]} position=0 end=row+1" if regular else "IRREGULAR (not pad, 0, row + 1)"
    out.line(f"[{start}, {stop}) padding {what}", 1)
