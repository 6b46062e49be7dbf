"""The written-amount reader (extract/written.py): the amounts a content writes with their currency, the answers
a `<$>` slot reads for them, and how a bare number is grounded and merged with the amount written; the numbers it
writes, and the answers a `<n>` or `<$>` slot keeps: those of a value written."""

from __future__ import annotations

import math

import pytest

from spinfc.ir.nodes import AmountSlot, NumberSlot
from spinfc.runtime.extract.answers import Answer, among_written, grounded, merged
from spinfc.runtime.extract.written import (
    WrittenAmount,
    amount_spellings,
    written_amounts,
    written_answers,
    written_currency,
    written_for,
    written_numbers,
)


@pytest.mark.parametrize(("content", "want"), [
    ("The repair cost $30 and took two days.", [("$30", 30, "USD", "30")]),
    ("It cost US$30 in the end.", [("US$30", 30, "USD", "30")]),
    ("The fee is USD 45.", [("USD 45", 45, "USD", "45")]),
    ("The ticket was €1,250.", [("€1,250", 1250, "EUR", "1,250")]),
    ("Price: EUR 1.250,00 incl. VAT.", [("EUR 1.250,00", 1250, "EUR", "1.250,00")]),
    ("The sandwich was £7.50.", [("£7.50", 7.5, "GBP", "7.50")]),
    ("Price: ¥300 per bowl.", [("¥300", 300, "JPY", "300")]),
    ("The fee is 30 USD.", [("30 USD", 30, "USD", "30")]),
    ("We paid 1,250 euros.", [("1,250 euros", 1250, "EUR", "1,250")]),
    ("Total: $1,250.00, or 1.250,00 € (C$1,700 in Canada); 30€ more, 30 dollars each.",
     [("$1,250.00", 1250, "USD", "1,250.00"), ("1.250,00 €", 1250, "EUR", "1.250,00"),
      ("C$1,700", 1700, "CAD", "1,700"), ("30€", 30, "EUR", "30"), ("30 dollars", 30, "USD", "30")]),
])
def test_each_written_form_is_read_with_its_value_and_currency(content, want) -> None:
    got = [(a.text, a.value, a.currency, a.number) for a in written_amounts(content)]
    assert got == want


@pytest.mark.parametrize("content", [
    "In 2024 we shipped 3 boxes.",  # numbers without a currency
    "It weighs 30 GB and costs nothing; 5 PCS.",  # three capitals that are not a currency code
    "Version 1.250,00a of the USDA report",  # a code inside a word
])
def test_a_number_without_a_currency_beside_it_is_not_an_amount(content) -> None:
    assert written_amounts(content) == ()


def test_a_number_is_read_whole_in_either_notation() -> None:
    """`1.250,00` is one number (not `1.250` then `,00`), and a spelling written twice is read once."""
    assert [a.value for a in written_amounts("EUR 1.250,00 and EUR 1.250,00 again, or 12,50 €")] == [1250, 12.5]


def test_the_currency_written_beside_a_value_is_read_only_when_it_is_one() -> None:
    amounts = written_amounts("$30 now, €30 later, £7.50 for the sandwich")
    assert written_currency(amounts, 7.5) == "GBP"
    assert written_currency(amounts, 30) is None  # two currencies: the bare number stays bare
    assert written_currency(amounts, 12) is None


class _Characters:
    """A tokenizer of one token per character (ids are code points): enough to check what is read."""

    def __call__(self, text, add_special_tokens=False):
        return type("Encoded", (), {"input_ids": [ord(c) for c in text]})()

    def decode(self, tokens, skip_special_tokens=False):
        return "".join(chr(t) for t in tokens)


def test_each_written_amount_is_read_in_its_spelling_and_as_its_number() -> None:
    """After the slot's lead: the spelling and the number alone, each ending with the terminator (a newline
    without one); within the slot's max_tokens and its beams' rows."""
    tokenizer = _Characters()
    amounts = amount_spellings(written_amounts("It cost US$30, US$30 in all."))
    assert [tokenizer.decode(t) for t in written_answers(tokenizer, amounts, " ", "", 16, 64)] == [" US$30\n", " 30\n"]
    assert [tokenizer.decode(t) for t in written_answers(tokenizer, amounts, "", '"', 16, 64)] == ['US$30"', '30"']
    assert [len(t) for t in written_answers(tokenizer, amounts, " ", "", 6, 64)] == [4]  # ` US$30\n` is 7 long
    assert len(written_answers(tokenizer, amounts, " ", "", 16, 10)) == 1  # 7 rows, then 4 more would be 11


def _answer(text: str, logprob: float, value, currency) -> Answer:
    return Answer(text, (), logprob, logprob - 1.0, value=value, currency=currency)


def test_a_bare_number_grounded_to_its_written_currency_is_one_answer_with_it() -> None:
    """`7.5` after "£7.50" is the content's £7.50: one answer whose probability is the two texts' summed (each the
    model's own probability), written with its currency; a bare number the content does not write stays bare."""
    amounts = (WrittenAmount("£7.50", 7.5, "GBP", "7.50"),)
    answers = merged(grounded((_answer("7.5", -4.0, 7.5, None), _answer("£7.50", -5.0, 7.5, "GBP"),
                               _answer("12", -6.0, 12, None)), amounts))
    assert [(a.text, a.currency, a.forms) for a in answers] == [("£7.50", "GBP", ("7.5", "£7.50")), ("12", None, ())]
    assert answers[0].logprob == pytest.approx(math.log(math.exp(-4.0) + math.exp(-5.0)))
    assert answers[0].floor_logprob == pytest.approx(math.log(math.exp(-5.0) + math.exp(-6.0)))


def test_a_merged_amount_is_written_as_the_content_spells_it() -> None:
    """`$30` and `US$30` are one answer; after "It cost US$30" its text is `US$30`, though `$30` is likelier."""
    answers = (_answer("$30", -3.0, 30, "USD"), _answer("US$30", -5.0, 30, "USD"), _answer("30", -4.0, 30, "USD"))
    assert merged(answers)[0].text == "$30"
    (one,) = merged(answers, frozenset({"US$30"}))
    assert (one.text, one.forms) == ("US$30", ("$30", "30", "US$30"))


def test_the_numbers_a_content_writes_in_digits_and_words() -> None:
    """`<n>` answers among them (issue 47 item 5): digits as written, not inside a word or a longer number, and the
    number words as their digits."""
    got = [(n.text, n.value) for n in written_numbers("Invoice 2231: $1,250 due in two weeks, COVID-19, A4, "
                                                      "1.250,00 EUR, -5 and +7.5")]
    assert got == [("2231", 2231), ("1,250", 1250), ("19", 19), ("-5", -5), ("+7.5", 7.5), ("2", 2)]
    assert written_numbers("Nothing is owed.") == ()


def test_what_a_slot_answers_among() -> None:
    """`<$>`: the amounts written with a currency, or where none is written the bare numbers (as `<$>` reads them);
    `<n>`: every number."""
    amount = written_for(AmountSlot(), "Invoice 2231: $1,250 due.")
    assert amount.values == {(1250, "USD")} and amount.spellings == ("$1,250", "1,250")
    assert written_for(AmountSlot(), "Invoice 2231 is due.").values == {(2231, None)}
    assert written_for(AmountSlot(), "Pay +7.5 now.").spellings == ()  # `+7.5` is no answer of <$>: not read
    assert written_for(NumberSlot(), "Invoice 2231: $1,250 due.").values == {(2231, None), (1250, None)}


def test_the_answers_are_those_of_a_value_written_with_its_currency_or_none() -> None:
    """After "Pay USD 45 now.": `USD 45`, `$45`, `45`, not ` 1.00` (the issue's top answer) nor `€45`."""
    written = written_for(AmountSlot(), "Pay USD 45 now.")
    answers = (_answer("1.00", -3.0, 1.0, None), _answer("USD 45", -4.0, 45, "USD"), _answer("$45", -5.0, 45, "USD"),
               _answer("€45", -5.5, 45, "EUR"), _answer("45", -6.0, 45, None))
    assert [a.text for a in among_written(answers, written)] == ["USD 45", "$45", "45"]
    assert among_written(answers, written_for(AmountSlot(), "Nothing is owed.")) == ()
