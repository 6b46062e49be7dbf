"""One question as written, read from a pack's `[[questions]]` table or a request's `scoring.queries[i]`.

Both have the same keys and the same rules, so a mistake reads the same in a pack file and in a request:

    id            what the answers are reported under
    template      text with one slot (template.lark); placeholders {name} take their values from `placeholders`
    options       the answers of an option slot <?>, e.g. [" yes", " no"]; only for <?>
    codes         instead of options, for a decision model: the codes of its head to read at <?> ("all", or a
                  list of its labels, e.g. ["billing", "refund"])
    placeholders  {name = ["value", ...]}: one question per combination of values (a grid)
    max_tokens    the longest answer of an extraction slot (<*> <n> <$> <gen>), in tokens, the terminator included
    beam_width    how many answers a searched slot (<*> <n> <$>) keeps at each step and returns at most
    temperature   <gen> only: 0 (the default) is greedy; above 0 samples
    seed          <gen> only, with a temperature: the same seed gives the same text
    generate      true turns a <*> text slot into generated free text (as <gen>)
    free          <n> and <$> only: true answers any number (amount) the model finds, not only those the content
                  writes
"""

from __future__ import annotations

from spinfc.frontend.fields import Fields, dotted
from spinfc.ir.nodes import (
    AmountSlot,
    GenerateSlot,
    NumberSlot,
    Option,
    OptionSlot,
    Placeholder,
    Query,
    Slot,
    SlotRef,
    Template,
    Text,
    TextSlot,
)

QUERY_KEYS = ("id", "template", "options", "codes", "placeholders", "max_tokens", "beam_width", "temperature",
              "seed", "generate", "free")
EXTRACTION_KEYS = ("max_tokens", "beam_width", "temperature", "seed", "generate", "free")
QUERY_ID = r"[A-Za-z0-9_][A-Za-z0-9_.:-]*"
MAX_TOKENS_LIMIT = 512
BEAM_WIDTH_LIMIT = 64  # the server's --max-beam-width (default 16) is the usual bound
SEED_RANGE = (-(2**63), 2**63 - 1)  # a 64-bit integer, as OpenAI's `seed` (a sampler's generator takes no more)
_EXTRACTORS = {"text": TextSlot, "number": NumberSlot, "amount": AmountSlot, "generate": GenerateSlot}


def read_query(f: Fields) -> Query:
    """A checked `Query`: a template with one slot, options iff it is an option slot, every placeholder valued."""
    f.check_keys(QUERY_KEYS)
    query_id = f.string("id", "question id", '"refund_request"', pattern=QUERY_ID)
    template = f.template("template", "template", '"\\n\\nIs the customer asking for a refund?\\nAnswer:<?>"')
    ref = template.slot
    if ref is None:
        f.fail(
            "template",
            "the template has no slot: nothing would be scored",
            code="missing_slot",
            hint="end the question with a slot: Answer:<?> with options, or <*> <n> <$> <gen> to extract",
        )
    placeholders = _placeholders(f, template)
    return Query(query_id, template, _slot(f, template, ref), placeholders)


def _placeholders(f: Fields, template: Template) -> tuple[tuple[str, tuple[str, ...]], ...]:
    names = template.placeholders
    given = f.table("placeholders", "placeholder values", '{ aspect = ["price", "quality"] }', default=None)
    values: dict[str, tuple[str, ...]] = {}
    if given is not None:
        for name in given.data:
            if name not in names:
                note = " ({n} is the number slot, not a placeholder)" if name == "n" else ""
                given.fail(
                    name,
                    f"placeholder `{name}` has values but the template never uses {{{name}}}{note}",
                    code="unused_placeholder",
                    at_key=True,
                    hint=f"write {{{name}}} in the template where the value goes, or remove `{name}`",
                )
            if given.data[name] == []:
                given.fail(
                    name,
                    f"placeholder {{{name}}} has no values",
                    code="placeholder_without_values",
                    hint=f'give at least one value, e.g. {name} = ["price", "quality"]',
                )
            values[name] = given.strings(name, "value", '["price", "quality"]')
    for part in template.parts:
        if isinstance(part, Placeholder) and part.name not in values:
            raise f.error(
                f"placeholder {{{part.name}}} has no values",
                part.loc,
                code="placeholder_without_values",
                hint=f'give its values next to the template: placeholders = {{ {part.name} = ["a", "b"] }}',
                param=_param(f, "template"),
            )
    return tuple((name, values[name]) for name in names)


def _slot(f: Fields, template: Template, ref: SlotRef) -> Slot:
    after = "".join(p.text for p in template.parts[template.parts.index(ref) + 1 :] if isinstance(p, Text))
    if ref.kind != "options":
        if f.has("codes"):
            f.fail(
                "codes",
                f"codes given to a {ref.kind} slot; a decision model's codes are read at an option slot <?>",
                code="codes_not_allowed",
                at_key=True,
                hint="use <?> (or {?}) in the template to read the codes, or remove `codes`",
            )
        if f.has("options"):
            f.fail(
                "options",
                f"options given to a {ref.kind} slot; only an option slot <?> takes options",
                code="options_not_allowed",
                at_key=True,
                hint="use <?> (or {?}) in the template to score these options, or remove `options`",
            )
        if f.has("generate") and ref.kind != "text":
            f.fail(
                "generate",
                f"`generate` turns a text slot <*> into free text; this is a {ref.kind} slot",
                code="not_allowed",
                at_key=True,
                hint="remove `generate`, or use <gen> for free text",
            )
        kind = "generate" if ref.kind == "text" and _generate(f) else ref.kind
        return _extractor(f, kind, after)
    for key in EXTRACTION_KEYS:
        if f.has(key):
            f.fail(
                key,
                f"`{key}` is for extraction slots; this is an option slot <?>",
                code="not_allowed",
                at_key=True,
                hint=f"remove `{key}`: an option slot scores the options given, nothing is decoded",
            )
    if after.strip():
        raise f.error(
            f"text after an option slot is never read: {after.strip()!r}",
            ref.loc,
            code="text_after_option_slot",
            hint="end the template with the slot; put any text the model should read before it",
            param=_param(f, "template"),
        )
    if f.has("codes"):
        return _codes(f)
    if not f.has("options") or f.data["options"] == []:
        raise f.error(
            "the option slot has no options",
            ref.loc if not f.has("options") else f.loc("options"),
            code="no_options",
            hint='give the answers to score, with their leading space: options = [" yes", " no"] (for a decision '
                 'model: codes = "all")',
            param=_param(f, "options"),
        )
    options = f.strings("options", "option", '[" yes", " no"]', unique="duplicate_option")
    for index, text in enumerate(options):
        if not text.strip():
            f.fail(
                ("options", index),
                f"option {index + 1} is {'empty' if not text else 'only whitespace'}",
                code="empty_option",
                hint='an option is the answer text, with its leading space: " yes"',
            )
    return OptionSlot(tuple(Option(text) for text in options))


def _codes(f: Fields) -> OptionSlot:
    """The option slot of a question to a decision model: `codes = "all"` (every code of its head, filled in by
    tokenize, which knows the model) or a list of its codes (their probabilities normalised over the list)."""
    if f.has("options"):
        f.fail("codes", "a question gives `options` (text) or `codes` (a decision model's labels), not both",
               code="options_and_codes", at_key=True,
               hint="keep `codes` for a decision model, `options` for a model that reads its vocabulary")
    if f.data["codes"] == "all":
        return OptionSlot((), codes=True)
    if isinstance(f.data["codes"], str):
        f.fail("codes", f"codes = {f.data['codes']!r}: give \"all\" or a list of the model's codes",
               code="invalid_value", hint='codes = "all", or codes = ["billing", "refund"]')
    codes = f.strings("codes", "code", '["billing", "refund"]', unique="duplicate_code")
    return OptionSlot(tuple(Option(code) for code in codes), codes=True)


def _extractor(f: Fields, kind: str, after: str) -> Slot:
    """The slot of an extraction query: its terminator (the text after it), its token bound, and its search
    (`beam_width`) or sampling (`temperature`, `seed`) settings, each only where the kind uses it."""
    cls = _EXTRACTORS[kind]
    default = cls()
    if f.has("free") and kind not in ("number", "amount"):
        f.fail("free", f"`free` lets a <n> or <$> slot answer a number or amount the content does not write; this is "
               f"a {kind} slot", code="not_allowed", at_key=True,
               hint="remove `free`: the answers of a <*> or <gen> slot are whatever text the model finds")
    max_tokens = _count(f, "max_tokens", default.max_tokens, MAX_TOKENS_LIMIT)
    if kind == "generate":
        if f.has("beam_width"):
            f.fail("beam_width", "`beam_width` is for searched slots (<*> <n> <$>); <gen> is generated",
                   code="not_allowed", at_key=True, hint="remove `beam_width`, or use <*> for searched answers")
        temperature = float(f.value("temperature", (int, float), "temperature", "0.7", default=0.0))
        if not 0.0 <= temperature <= 2.0:
            f.fail("temperature", f"temperature = {temperature} is out of range", code="invalid_value",
                   hint="give 0 (greedy) or a value up to 2")
        seed = f.value("seed", int, "seed", "1234", default=None)
        if seed is not None and not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            f.fail("seed", f"seed = {seed} is outside 64 bits", code="invalid_value",
                   hint=f"give an integer from {SEED_RANGE[0]} to {SEED_RANGE[1]}")
        return cls(stop=after, max_tokens=max_tokens, temperature=temperature,
                   seed=None if seed is None else int(seed))
    for key in ("temperature", "seed"):
        if f.has(key):
            f.fail(key, f"`{key}` is for generated slots (<gen>); a {kind} slot is searched, not sampled",
                   code="not_allowed", at_key=True, hint=f"remove `{key}`, or set `beam_width` for more answers")
    beam_width = _count(f, "beam_width", default.beam_width, BEAM_WIDTH_LIMIT)
    if kind == "text":
        return cls(stop=after, max_tokens=max_tokens, beam_width=beam_width)
    return cls(stop=after, max_tokens=max_tokens, beam_width=beam_width,
               free=bool(f.value("free", bool, "flag", "true", default=False)))


def _count(f: Fields, key: str, default: int, limit: int) -> int:
    value = f.value(key, int, "count", str(default), default=default)
    if isinstance(value, bool) or not 1 <= int(value) <= limit:
        f.fail(key, f"{key} = {value} is out of range", code="invalid_value", hint=f"give a count from 1 to {limit}")
    return int(value)


def _generate(f: Fields) -> bool:
    return bool(f.value("generate", bool, "flag", "true", default=False))


def _param(f: Fields, key: str) -> str:
    return dotted(f.key_path(key))
