"""The amounts and numbers a content writes, as the `<$>` and `<n>` slots read them: an amount is a currency before or
after a number, spelled as the content spells it; a number is written in digits (`1,250`, `12.99`) or as a word
(`two`, `twenty`).

    "The repair cost $30 and took two days."   -> $30            (30, USD)
    "Price: EUR 1.250,00 incl. VAT."            -> EUR 1.250,00   (1250, EUR)
    "We paid 1,250 euros, or US$1,400."         -> 1,250 euros    (1250, EUR), US$1,400 (1400, USD)

A currency is a symbol (`$ € £ ¥ ₹ ₩`), a prefixed dollar (`US$ A$ C$ HK$ NZ$ S$ R$`), an ISO 4217 code of
`ISO_CODES` (a space or none between it and the number) or a currency word after the number (`euros`, `dollars`,
`pounds`, `yen`, `rupees`, `francs`, singular or plural). The number is written either way `<$>` reads it
(`1,250.00`, `1.250,00`). A number without a currency beside it is not an amount here.

Why: a small model asked "How much money?" often ranks a bare or invented number above the amount the content
writes, and its beams may never reach the written spelling (SmolLM2-135M answers `200` after "The repair cost
$30"). The decode reads each written amount, and its number alone, exactly as answers of the slot (their tokens'
log-probability, like any answer the beams find: `written_answers`), a bare number is the amount the content writes
with that value (`answers.grounded`), and a merged amount is written as the content spells it (`answers.merged`).
Unless the slot is `free`, the answers are then only those of a value the content writes (`answers.among_written`:
"Pay USD 45 now." answered ` 1.00` before).
"""

from __future__ import annotations

import re

import attrs

from spinfc.ir.decode_plan import (
    AMOUNT,
    AMOUNT_NUMBER,
    DOLLAR_PREFIXES,
    GROUPED_COMMA,
    GROUPED_POINT,
    NUMBER,
    SYMBOLS,
    WORDS,
)
from spinfc.ir.nodes import AmountSlot
from spinfc.runtime.extract.amounts import parse_amount
from spinfc.runtime.extract.grammars import parse_number

# The codes read when written beside a number (a capitalised word of three letters is too often something else:
# `30 GBs`, `5 PCS`). The slot's grammar still accepts any three capitals the model writes.
ISO_CODES = ("USD EUR GBP JPY CNY INR KRW CHF CAD AUD NZD HKD SGD SEK NOK DKK PLN CZK HUF RON BGN ISK RUB UAH TRY "
             "BRL MXN ARS CLP COP PEN ZAR EGP NGN KES ILS AED SAR QAR THB IDR MYR PHP VND TWD").split()
_CODE = rf"(?<![A-Za-z])({'|'.join(ISO_CODES)})(?![A-Za-z])"
_BEFORE = rf"((?<![A-Za-z])({DOLLAR_PREFIXES})\$|[{SYMBOLS}]|{_CODE})"
_AFTER = rf"([{SYMBOLS}]|{_CODE}|({WORDS})(?![A-Za-z]))"


def _number(name: str) -> str:
    """A number as `<$>` reads it, not inside a longer one (`1.250` of `1.250,00`), in the group `name`."""
    return rf"(?<![0-9.,])(?P<{name}>{GROUPED_POINT}|{GROUPED_COMMA})(?![0-9]|[.,][0-9])"


_WRITTEN = re.compile(rf"{_BEFORE} ?{_number('number')}( ?{_AFTER})?|{_number('number_first')} ?{_AFTER}")


# a number written as `<n>` reads it, not inside a longer number or a word (`A4`, the `1.250` of `1.250,00`)
_DIGITS = re.compile(rf"(?<![0-9A-Za-z.,])({NUMBER})(?![0-9A-Za-z]|[.,][0-9])")
NUMBER_WORDS = {word: value for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000}
_WORD = re.compile(rf"(?<![A-Za-z])({'|'.join(NUMBER_WORDS)})(?![A-Za-z])", re.IGNORECASE)


@attrs.frozen
class WrittenNumber:
    text: str  # how an answer of the slot writes it: the digits as the content writes them (`1,250`), or a word's
    value: int | float  # value in digits (`2` for `two`)


@attrs.frozen
class WrittenAmount:
    text: str  # as the content writes it: `US$30`, `1,250 euros`
    value: int | float
    currency: str  # its ISO 4217 code
    number: str  # its number as written: `30`, `1,250`


def written_amounts(text: str) -> tuple[WrittenAmount, ...]:
    """Every amount `text` writes with its currency, in the order written, each spelling once."""
    found: dict[str, WrittenAmount] = {}
    for match in _WRITTEN.finditer(text):
        spelling = match.group(0)
        if spelling in found or not re.fullmatch(AMOUNT, spelling):
            continue
        currency, value = parse_amount(spelling)
        if currency is not None:
            number = next(g for g in (match.group("number"), match.group("number_first")) if g)
            found[spelling] = WrittenAmount(spelling, value, currency, number)
    return tuple(found.values())


def written_numbers(text: str) -> tuple[WrittenNumber, ...]:
    """Every number `text` writes, in digits or as a word (zero to twenty, the tens, hundred, thousand), each
    spelling once, digits first in the order written, then words."""
    found = {m.group(1): WrittenNumber(m.group(1), parse_number(m.group(1))) for m in _DIGITS.finditer(text)}
    for match in _WORD.finditer(text):
        value = NUMBER_WORDS[match.group(1).lower()]
        found.setdefault(str(value), WrittenNumber(str(value), value))
    return tuple(found.values())


def written_currency(amounts: tuple[WrittenAmount, ...], value: int | float) -> str | None:
    """The one currency the content writes beside `value` (None when it writes none, or several)."""
    codes = {a.currency for a in amounts if a.value == value}
    return codes.pop() if len(codes) == 1 else None


@attrs.frozen
class Written:
    """What a `<n>` or `<$>` slot answers among on one content: the `values` written, (value, currency) pairs (the
    currency None where none is written beside it); the `spellings` read exactly as answers of the slot; and the
    `amounts` (a `<$>` slot's: a bare number answer takes their currency, a merged one their spelling)."""

    values: frozenset[tuple[int | float, str | None]]
    spellings: tuple[str, ...]
    amounts: tuple[WrittenAmount, ...] = ()


def written_for(slot, text: str) -> Written:
    """What `text` writes for `slot`: for `<$>` its amounts with a currency, or where it writes none its numbers
    (bare: `2231` in "Invoice 2231 is due"); for `<n>` its numbers, in digits or words. A `free` slot's search is
    the one it always was: a `<$>` slot reads the amounts written beside it, nothing else is read."""
    amounts = written_amounts(text) if isinstance(slot, AmountSlot) else ()
    if amounts or slot.free:
        return Written(frozenset((a.value, a.currency) for a in amounts), tuple(amount_spellings(amounts)), amounts)
    form = AMOUNT_NUMBER if isinstance(slot, AmountSlot) else NUMBER  # a spelling is an answer of the slot
    numbers = [n for n in written_numbers(text) if re.fullmatch(form, n.text)]
    return Written(frozenset((n.value, None) for n in numbers), tuple(n.text for n in numbers))


def amount_spellings(amounts: tuple[WrittenAmount, ...]) -> list[str]:
    """Each written amount's answers: its spelling, and its number alone (which `grounded` reads as the same
    amount)."""
    return [spelling for a in amounts for spelling in (a.text, a.number)]


def written_answers(tokenizer, spellings: list[str], lead: str, end: str, max_tokens: int,
                    rows: int) -> list[tuple[int, ...]]:
    """Each written value's `spellings` as tokens of answers of the slot: `lead`, the spelling, then the slot's
    terminator `end` (a newline when nothing follows the slot). The tokenizer's own tokens of that text (the ones
    the model most likely writes it with), each text once, in the order written; none longer than `max_tokens`, and
    no more than `rows` tokens in all (the slot's beams' rows, `budget.decode_tokens`: what `budget.decode_work`
    counts).

    One ending each: the same answer ended by a stop token is another answer the beams may find (and `merged` adds
    in); on both packaged models it held under 1% of the newline's probability, for a read as long again."""
    answers = []
    for text in dict.fromkeys(lead + spelling + (end or "\n") for spelling in spellings):
        tokens = tuple(tokenizer(text, add_special_tokens=False).input_ids)
        if tokenizer.decode(list(tokens)) != text or len(tokens) > max_tokens:
            continue  # the tokenizer does not write it back as read (not an answer the grammar took), or too long
        if len(tokens) > rows:
            break
        answers.append(tokens)
        rows -= len(tokens)
    return answers
