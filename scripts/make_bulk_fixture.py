"""Writes fixtures/support-messages.parquet: 200 short customer support messages with ids (`id`, `text`), the
fixture of `spinfc score` (tests/bulk). Deterministic: running it again writes the same rows.

The messages were written for this project (no data set and no real customer is quoted): forty kinds of message a
support queue gets (the intents spinfc/support-triage asks about: refunds, cancellations, delivery, log-in,
security, how-to, frustration), each in five variants (product, order number, month, days, opening and sign-off),
so every one of the 200 texts is different. Four row groups of 50 rows.

    python scripts/make_bulk_fixture.py [OUTPUT]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# Forty messages of the kinds a support queue gets; {product}, {order}, {month} and {days} vary across the rows.
MESSAGES = [
    "I was charged twice for {month}. Please refund one of the charges.",
    "My {product} arrived with a cracked screen. I want a replacement or my money back.",
    "Order {order} still hasn't arrived and it has been {days} days. Where is it?",
    "How do I change the email address on my account?",
    "I can't log in since the update, it says my password is wrong but I just reset it.",
    "Please cancel my subscription, I don't use the {product} app anymore.",
    "Someone logged into my account from another country and changed my address. Help!",
    "The {product} keeps showing error 503 when I try to sync. This is the third time I'm writing about it.",
    "Can you delete all my personal data? I'm closing my account.",
    "I received the wrong item in order {order}: I ordered a {product} and got a phone case.",
    "Your invoice for {month} lists a premium plan I never signed up for.",
    "Is there a way to export my data to CSV?",
    "The package for order {order} came open and two items are missing.",
    "I need this fixed today, our whole team is blocked and we have a client demo tomorrow.",
    "Thanks for the quick help yesterday, everything works now!",
    "I want to cancel order {order} before it ships.",
    "The {product} stopped charging after {days} days. Is it covered by the warranty?",
    "Why did my monthly price go up in {month}? Nobody told me.",
    "If this isn't resolved by Friday I will dispute the charge with my bank.",
    "How do I add a second user to our plan?",
    "The tracking page for order {order} hasn't changed in {days} days.",
    "My account was locked after too many login attempts. How long do I have to wait?",
    "I was promised a refund for order {order} two weeks ago and still haven't received it.",
    "The app crashes every time I open the settings page on my {product}.",
    "Can I change the delivery address for order {order}?",
    "I keep getting emails meant for someone else. Is my account compromised?",
    "Please close my account and stop billing my card.",
    "The {product} manual is missing from the box. Where can I download it?",
    "Your courier left my parcel in the rain and the {product} inside is ruined.",
    "I've called three times about this and nobody calls back. Worst service ever.",
    "Does the {product} work with older models of the charger?",
    "I got charged for shipping even though my order was over the free shipping limit.",
    "Two-factor codes never arrive on my phone, so I can't get into my account.",
    "Order {order} was delivered to the wrong address according to the photo.",
    "How do I pause my subscription for {month}?",
    "I'd like a copy of all invoices from last year for my accountant.",
    "The discount code from your newsletter doesn't work at checkout.",
    "My {product} arrived late, after the birthday it was meant for. Very disappointed.",
    "After the last update the {product} won't connect to wifi at all.",
    "I want to speak to a manager. I will post about this on social media if nobody helps.",
]
PRODUCTS = ["X200 headphones", "SmartHome hub", "Kettle Pro", "Fitband 3", "Photo frame"]
MONTHS = ["January", "March", "June", "September", "November"]
# one opening and one sign-off per variant: the messages without a placeholder differ across the variants too
OPENINGS = ["", "Hi. ", "Hello support, ", "Good morning. ", "Hey, "]
SIGN_OFFS = ["", " Thanks, Dana", " Regards, Priya", " - Tom", " Thank you."]


def rows() -> list[dict]:
    out = []
    for variant in range(5):
        for k, message in enumerate(MESSAGES):
            n = variant * len(MESSAGES) + k
            text = message.format(product=PRODUCTS[(k + variant) % 5], order=f"#{48213 + 37 * n}",
                                  month=MONTHS[(k * 3 + variant) % 5], days=4 + (n * 7) % 20)
            opening = OPENINGS[variant]
            if opening.endswith(", ") and not text.startswith(("I ", "I'")):  # "Hey, can I ...": one sentence
                text = text[0].lower() + text[1:]
            out.append({"id": f"msg-{n:04d}", "text": opening + text + SIGN_OFFS[variant]})
    return out


def main(path: str = "fixtures/support-messages.parquet") -> None:
    table = pa.Table.from_pylist(rows(), schema=pa.schema([("id", pa.string()), ("text", pa.string())]))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=50)
    print(f"{path}: {table.num_rows} rows")


if __name__ == "__main__":
    main(*sys.argv[1:])
