"""What a `<$>` answer is worth: its number, read in either notation, and its currency as an ISO 4217 code.

    $1,250  US$1,250  1,250 USD  USD 1,250  1250 dollars   -> 1250, "USD"
    €1,250  1.250,00 €  EUR 1,250  1,250 euros    -> 1250, "EUR"
    1250                                          -> 1250, None (the answer names no currency)

A number with `,` groups and a `.` decimal part (`1,250.50`) or `.` groups and a `,` decimal part (`1.250,50`); a
lone `,` before one or two digits is a decimal comma (`12,50`), before three a group (`1,250`); a lone `.` is a
decimal point (`1.250` is 1.25: with a single group and no decimal part the two notations cannot be told apart).
`$` is read as USD, `¥` as JPY, `A$` `C$` `HK$` `NZ$` `S$` `R$` as AUD CAD HKD NZD SGD BRL. Answers with the same
value and currency are one answer (`merged`).
"""

from __future__ import annotations

import re

from spinfc.ir.decode_plan import AMOUNT_NUMBER, CURRENCY, GROUPED_POINT

SYMBOL_CODES = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR", "₩": "KRW", "US$": "USD", "A$": "AUD",
                "C$": "CAD", "HK$": "HKD", "NZ$": "NZD", "S$": "SGD", "R$": "BRL"}
WORD_CODES = {"euro": "EUR", "dollar": "USD", "pound": "GBP", "yen": "JPY", "rupee": "INR", "franc": "CHF"}
_AMOUNT = re.compile(rf"((?P<minus>-?)(?P<before>{CURRENCY}) ?)?(?P<number>{AMOUNT_NUMBER})( ?(?P<after>{CURRENCY}))?")


def currency_code(written: str) -> str:
    """The ISO 4217 code of a currency as written: a symbol, a word (singular or plural, any case) or a code."""
    if written in SYMBOL_CODES:
        return SYMBOL_CODES[written]
    word = written.lower().removesuffix("s")
    return WORD_CODES.get(word, written)


def amount_number(text: str) -> int | float:
    """The value of an amount's number (`AMOUNT_NUMBER`): an int without a decimal part."""
    negative, digits = text.startswith("-"), text.lstrip("-")
    if not re.fullmatch(GROUPED_POINT, digits):  # `.` groups, `,` decimals
        digits = digits.replace(".", "").replace(",", ".")
    digits = digits.replace(",", "")
    value = float(digits) if "." in digits else int(digits)
    return -value if negative else value


def parse_amount(text: str) -> tuple[str | None, int | float]:
    """(currency code or None, value) of an amount answer (`AMOUNT`, with an optional leading space); a minus sign
    before the currency or the number makes it negative."""
    match = _AMOUNT.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an amount")
    value = amount_number(match.group("number"))
    written = match.group("before") or match.group("after")
    return (currency_code(written) if written else None), -value if match.group("minus") else value
