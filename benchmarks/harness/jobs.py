"""The seed-shaped job: contents of about 470 tokens, 56 two-option questions of about 20 tokens each.

The seed's public set is 24 Wikinews articles; here each content is built from news-style paragraphs in a rotating
order (throughput depends on token counts, not on which words they are), and the 56 questions are written out one by
one, as a user would write them: no placeholders, so the baselines see exactly the same text.

`text_job(tokenizer)` is the job as /v1/score bodies in each request pattern a served study sends: one request of
every content, N requests sharing them, one request per content.
"""

from __future__ import annotations

import attrs

PARAGRAPHS = (
    "The regional transport authority announced on Monday that the northern rail line will close for eleven weeks "
    "this summer while engineers replace a bridge built in 1911. Replacement buses will run every fifteen minutes.",
    "Shares in the country's largest grocery chain fell six percent after it reported that quarterly profit had "
    "dropped by a third, blaming higher energy bills and a price war with discount rivals.",
    "Firefighters brought a blaze at a recycling plant on the edge of the city under control late on Sunday. No one "
    "was hurt, but residents were told to keep windows closed because of the smoke.",
    "The health ministry said the number of measles cases this year has already passed last year's total, and urged "
    "parents to check that their children have had both doses of the vaccine.",
    "A court in the capital sentenced a former mayor to four years in prison for taking bribes from construction "
    "firms in exchange for public contracts. His lawyers said they would appeal.",
    "The central bank left its main interest rate unchanged at 3.5 percent, saying inflation was falling more slowly "
    "than expected and that it was too early to talk about cuts.",
    "Heavy rain flooded dozens of streets in the coastal town overnight, and the river reached its highest level in "
    "twenty years. The army sent trucks to help move residents from low-lying homes.",
    "The national football team qualified for the finals after a late goal secured a one-all draw away from home, "
    "sending thousands of fans into the main square to celebrate.",
    "Researchers at the university published a study showing that a cheap blood test can detect early signs of "
    "kidney disease years before symptoms appear, which could change how doctors screen patients.",
    "The airline cancelled more than two hundred flights after cabin crew began a three-day strike over pay, leaving "
    "travellers stranded at airports across the country at the start of the holidays.",
    "Parliament approved a law that will require all new buildings to have solar panels from 2028, despite protests "
    "from builders who say it will raise the price of homes.",
    "Police arrested three men suspected of stealing copper cable from railway lines, a crime that has caused "
    "hundreds of delays this year and cost the rail operator millions.",
)

QUESTIONS = (
    "Is the article mainly about politics or government decisions?",
    "Is the article mainly about the economy, business or markets?",
    "Is the article mainly about a crime or a court case?",
    "Is the article mainly about health or medicine?",
    "Is the article mainly about sport?",
    "Is the article mainly about the weather or a natural disaster?",
    "Is the article mainly about science or research?",
    "Is the article mainly about transport or travel?",
    "Does the article report that someone was injured or killed?",
    "Does the article mention a specific amount of money?",
    "Does the article mention a specific date or time of day?",
    "Does the article quote a named person?",
    "Does the article mention a company by name?",
    "Does the article mention a government body or ministry?",
    "Does the article mention a court, a judge or a lawyer?",
    "Does the article mention the police or an arrest?",
    "Does the article mention a strike or a protest?",
    "Does the article describe damage to buildings or roads?",
    "Does the article mention an increase in prices?",
    "Does the article mention interest rates or inflation?",
    "Does the article mention shares or a stock market?",
    "Does the article mention a new law or regulation?",
    "Does the article mention schools, students or teachers?",
    "Does the article mention a hospital or doctors?",
    "Does the article mention a vaccine or a disease?",
    "Does the article mention trains, buses or flights?",
    "Does the article mention a delay or a cancellation?",
    "Does the article mention energy, fuel or electricity?",
    "Does the article mention the environment or pollution?",
    "Does the article mention a fire or an explosion?",
    "Does the article mention a flood or heavy rain?",
    "Does the article mention the army or soldiers?",
    "Does the article mention a sports team or a match?",
    "Does the article mention a university or a study?",
    "Does the article mention housing or home prices?",
    "Does the article mention jobs, wages or unemployment?",
    "Is the tone of the article mostly negative?",
    "Is the tone of the article mostly positive?",
    "Does the article describe an event that already happened?",
    "Does the article describe a plan for the future?",
    "Would a reader in another country find this article relevant?",
    "Does the article report an official announcement?",
    "Does the article present more than one point of view?",
    "Does the article mention a number of people affected?",
    "Does the article mention an appeal or a legal challenge?",
    "Does the article suggest that the situation is getting worse?",
    "Does the article suggest that the situation is getting better?",
    "Does the article mention a city or a town by name?",
    "Does the article mention a building, a bridge or a plant?",
    "Would this article fit in the business section of a newspaper?",
    "Would this article fit in the sports section of a newspaper?",
    "Would this article fit in the local news section of a newspaper?",
    "Is the article likely to worry its readers?",
    "Does the article give advice or instructions to the public?",
    "Does the article mention a record or the highest level in years?",
    "Does the article mention a company's profit or loss?",
)
assert len(QUESTIONS) == 56

OPTIONS = (" yes", " no")


def template(question: str) -> str:
    return f"\n\nQuestion: {question}\nAnswer (yes or no):<?>"


def content(index: int, tokenizer, tokens: int = 470) -> str:
    """Paragraphs in a rotation that starts at `index`, until the text has about `tokens` tokens."""
    text, k = "", index
    while len(tokenizer(text, add_special_tokens=False)["input_ids"]) < tokens:
        text += ("" if not text else " ") + PARAGRAPHS[k % len(PARAGRAPHS)]
        k += 1
    return text


def request_body(contents: list[str]) -> dict:
    """The job as a /v1/score request body."""
    return {
        "inputs": [{"messages": [{"role": "user", "content": text}]} for text in contents],
        "scoring": {
            "queries": [
                {"id": f"q{i:02d}", "template": template(question), "options": list(OPTIONS)}
                for i, question in enumerate(QUESTIONS)
            ]
        },
    }


@attrs.frozen
class TextJob:
    texts: tuple[str, ...]
    queries: tuple[dict, ...]  # the /v1/score queries every content is asked

    @property
    def questions(self) -> int:
        return len(self.texts) * len(self.queries)

    def body(self, texts) -> dict:
        return {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in texts],
                "scoring": {"queries": list(self.queries)}}

    @property
    def whole(self) -> dict:
        """One request of every content."""
        return self.body(self.texts)

    def split(self, requests: int) -> list[dict]:
        """`requests` requests sharing the contents in order (the last may hold fewer)."""
        step = -(-len(self.texts) // requests)
        return [self.body(self.texts[i:i + step]) for i in range(0, len(self.texts), step)]

    def one_each(self) -> list[dict]:
        """One request per content."""
        return [self.body([t]) for t in self.texts]


def text_job(tokenizer, contents: int = 24, tokens: int = 470, questions: int = 56) -> TextJob:
    """The seed-shaped job (`contents` of about `tokens` tokens, the first `questions` of QUESTIONS)."""
    texts = tuple(content(i, tokenizer, tokens) for i in range(contents))
    return TextJob(texts, tuple(request_body([])["scoring"]["queries"][:questions]))


SMALL = dict(contents=3, tokens=40, questions=4)  # a --small/--smoke job: the same code in seconds on the CPU


def fresh(job: TextJob, salt: str) -> TextJob:
    """The job with every content made new: a first line naming `salt` and the content's index, so no content is
    one an earlier request held (the content cache reads none of them; a served figure is on new contents)."""
    return attrs.evolve(job, texts=tuple(f"Bulletin {salt}-{i}.\n{text}" for i, text in enumerate(job.texts)))
