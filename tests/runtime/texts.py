"""Contents and questions for the parity tests: plain text, tokenized by each model's own tokenizer."""

from __future__ import annotations

from .tree_launch import Case, Question

SHORT = (
    "The city council of Rivermouth voted on Tuesday to close the old harbour bridge for repairs. "
    "Traffic will move to the ferry for six weeks, and shop owners near the bridge say they fear losing customers."
)
OTHER = "Dear support team, my order 4471 arrived broken and nobody answers the phone. I want my money back today."
LONG_PARTS = (
    "In the spring the valley farmers plant barley and oats, and they keep a few goats on the higher slopes. ",
    "The railway reached the valley in 1894, and with it came a post office, two inns and a small school. ",
    "Floods in the autumn of 1923 destroyed the lower mill, which the village rebuilt in stone the next year. ",
    "Today most visitors come for the walking trails, the cheese market on Saturdays and the old church organ. ",
    "The mayor, elected for the third time last winter, has promised a new bus line to the county town. ",
)
QUESTIONS = (
    ("\nQuestion: Is this text about a city? Answer:", (" yes", " no")),
    ("\nQuestion: What is the tone of the text? Answer:", (" negative", " neutral", " cautiously hopeful")),
    ("\nQuestion: Who wrote this text? Answer:", (" a journalist", " a customer")),
)


def long_text(tokens_at_least: int, tokenizer) -> str:
    """Paragraphs repeated until the text has at least this many tokens."""
    text, part = "", 0
    while len(tokenizer(text)["input_ids"]) < tokens_at_least:
        text += LONG_PARTS[part % len(LONG_PARTS)]
        part += 1
    return text


def make_case(tokenizer, content: str, questions=QUESTIONS) -> Case:
    """The content with the model's special tokens (e.g. Gemma's BOS), each prompt and option without."""
    encode = lambda text: tuple(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    questions = tuple(Question(encode(prompt), tuple(encode(o) for o in options)) for prompt, options in questions)
    case = Case(tuple(tokenizer(content)["input_ids"]), questions)
    assert any(len(o) > 1 for q in case.questions for o in q.options), "no multi-token option to exercise"
    return case
