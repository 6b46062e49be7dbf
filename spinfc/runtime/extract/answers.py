"""What an extraction question returns on one content, before it becomes JSON (results.py):

    searched (<*> <n> <$>)  answers, most likely first: text, logprob (answer and terminator), p (normalised over
                            the answers returned), floor_p (the same answers read on the floor, normalised the
                            same way), value (<n>, <$>) and currency (<$>); coverage: the probability mass the
                            answers hold together (sum of exp(logprob), at most 1). <n> and <$> answers with the
                            same value (and currency) are one answer (`merged`): their probabilities summed, their
                            texts kept as `forms`. No answer at all comes with the `reason`.
    generated (<gen>)       text, logprob (of every token drawn), finish_reason (stop or length)
"""

from __future__ import annotations

import math

import attrs

from spinfc.ir.nodes import AmountSlot, NumberSlot
from spinfc.runtime.extract.amounts import parse_amount
from spinfc.runtime.extract.grammars import parse_number
from spinfc.runtime.extract.written import Written, WrittenAmount, written_currency


@attrs.frozen
class Answer:
    text: str
    tokens: tuple[int, ...]
    logprob: float
    floor_logprob: float
    value: int | float | None = None
    currency: str | None = None
    forms: tuple[str, ...] = ()  # the texts merged into this answer, most likely first (when more than one)


@attrs.frozen
class Searched:
    answers: tuple[Answer, ...]
    reason: str | None = None  # why there is no answer, when there is none

    @property
    def coverage(self) -> float:
        return min(1.0, sum(math.exp(a.logprob) for a in self.answers))


@attrs.frozen
class Generated:
    text: str
    tokens: tuple[int, ...]
    logprob: float
    finish_reason: str


Extracted = Searched | Generated


def answer_text(tokenizer, tokens: tuple[int, ...], end: str, stop_tokens: frozenset[int], lead: str = "") -> str:
    """The answer's text: its tokens decoded, up to the terminator that ended it (or without the stop token), without
    the slot's `lead` (the spaces the template wrote before the slot)."""
    body = tokens[:-1] if tokens and tokens[-1] in stop_tokens else tokens
    text = tokenizer.decode(list(body), skip_special_tokens=False)
    cut = end or "\n"
    return (text[: text.index(cut)] if cut in text else text).removeprefix(lead)


def make_answer(slot, text: str, tokens: tuple[int, ...], logprob: float, floor_logprob: float) -> Answer:
    """An `Answer` with its parsed value for number and amount slots (the grammar guarantees they parse)."""
    if isinstance(slot, NumberSlot):
        return Answer(text, tokens, logprob, floor_logprob, value=parse_number(text))
    if isinstance(slot, AmountSlot):
        currency, value = parse_amount(text)
        return Answer(text, tokens, logprob, floor_logprob, value=value, currency=currency)
    return Answer(text, tokens, logprob, floor_logprob)


def merged(answers: tuple[Answer, ...], spelled: frozenset[str] = frozenset()) -> tuple[Answer, ...]:
    """Answers with the same value and currency (`$1,250` and `1,250 USD`; one text reached by two tokenizations)
    as one: logprob and floor logprob the log of the summed probabilities, every distinct text in `forms` when there
    are several, most likely first. Its text: the most likely of them the content spells so (`spelled`, a <$> slot's
    written amounts: "US$30" after "It cost US$30", though `$30` is likelier), else that writes its currency, else
    the most likely. Text answers (no value) are kept as they are."""
    out = []
    for group in _groups(answers).values():
        written = [a for a in group if a.currency is None or parse_amount(a.text)[0] is not None]
        best = max([a for a in group if a.text in spelled] or written or group, key=lambda a: a.logprob)
        forms = tuple(dict.fromkeys(a.text for a in sorted(group, key=lambda a: -a.logprob)))
        out.append(attrs.evolve(best, logprob=_logsumexp([a.logprob for a in group]),
                                floor_logprob=_logsumexp([a.floor_logprob for a in group]),
                                forms=forms if len(forms) > 1 else ()))
    return tuple(sorted(out, key=lambda a: -a.logprob))


def most_likely(answers: tuple[Answer, ...], width: int) -> tuple[Answer, ...]:
    """The answers of the `width` groups `merged` ranks first (by their summed probabilities), in their order:
    what a search returns, and all that is read on the floor."""
    groups = sorted(_groups(answers).values(), key=lambda g: -_logsumexp([a.logprob for a in g]))[:width]
    return tuple(answer for group in groups for answer in group)


def _groups(answers: tuple[Answer, ...]) -> dict[object, list[Answer]]:
    """Answers by value and currency (a text answer, without a value, alone)."""
    groups: dict[object, list[Answer]] = {}
    for k, answer in enumerate(answers):
        groups.setdefault((answer.value, answer.currency) if answer.value is not None else k, []).append(answer)
    return groups


def grounded(answers: tuple[Answer, ...], amounts: tuple[WrittenAmount, ...]) -> tuple[Answer, ...]:
    """Bare-number answers (no currency) given the one currency the content writes beside the same value
    (`written.written_currency`): `7.5` after "The sandwich was £7.50." is the content's £7.50."""
    return tuple(attrs.evolve(a, currency=written_currency(amounts, a.value))
                 if a.value is not None and a.currency is None else a for a in answers)


def among_written(answers: tuple[Answer, ...], written: Written) -> tuple[Answer, ...]:
    """The answers of a value the content writes (`written.values`), with its currency or none: after "Pay USD 45
    now." `USD 45`, `$45` and `45`, not `1.00` or `€45`. What a `<n>` or `<$>` slot answers unless it is `free`."""
    return tuple(a for a in answers if any(a.value == value and (currency is None or a.currency in (None, currency))
                                           for value, currency in written.values))


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top if top == -math.inf else top + math.log(sum(math.exp(v - top) for v in values))


def generated_text(tokenizer, tokens: tuple[int, ...], end: str, stop_tokens: frozenset[int]) -> str:
    """A generation's text: cut before the terminator, without a final stop token."""
    body = tokens[:-1] if tokens and tokens[-1] in stop_tokens else tokens
    text = tokenizer.decode(list(body), skip_special_tokens=False)
    return text[: text.index(end)] if end and end in text else text
