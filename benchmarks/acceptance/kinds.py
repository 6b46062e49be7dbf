"""Every kind of request the acceptance run sends, each a function of a served family that returns its `Check`.

A check passes when the route answers 200 and its numbers hold; what it measured (largest gap to transformers,
alone-vs-packed difference) is kept beside the verdict for the table and the JSON."""

from __future__ import annotations

import base64
import math

import attrs
import httpx

CONTENT = "Customer support message:\nI was charged twice for September, please refund one of the charges."
OTHERS = ("The parcel arrived broken and nobody answers the phone.",
          "Thanks, the replacement came the next day and works perfectly.",
          "Where is my order 4471? It was due on Monday.")
OPTIONS = {"question": "\n\nIs the customer asking for a refund?\nAnswer:", "options": [" yes", " no", " ok"]}
PROMPT_IDS = list(range(40, 72))  # token ids below 256: bytes in every family's byte-level tokenizer
# largest |spinfc - transformers (float32)| allowed in a logprob: the CPU runs float32 as transformers does; CUDA
# runs the default precision (fp16 products around a float32 residual stream), measured on these random models; an
# fp8-static checkpoint adds its scheme's own gap (1.18 on SmolLM2, benchmarks/NOTES.md), so it is bounded loosely
TOLERANCE = {"cpu": 1e-4, "cuda": 0.05, "fp8": 1.5}


@attrs.frozen
class Check:
    kind: str
    ok: bool
    detail: str = ""
    figure: float | None = None  # the number the check compared, where it compared one


@attrs.frozen
class Served:
    """What a kind needs of the family being served."""

    url: str
    device: str  # "cpu" or "cuda"
    media: tuple[str, ...]
    reference: dict  # reference.py's file
    tolerance: float  # TOLERANCE's entry for the device and scheme


def _post(served: Served, route: str, body: dict) -> httpx.Response:
    return httpx.post(served.url + route, json=body, timeout=300)


def _failed(kind: str, response: httpx.Response) -> Check:
    return Check(kind, False, f"{response.status_code}: {response.text[:300]}")


def _messages(content) -> list[dict]:
    return [{"role": "user", "content": content}]


def _options_query(query_id: str = "refund") -> dict:
    return {"id": query_id, "template": OPTIONS["question"] + "<?>", "options": OPTIONS["options"]}


def options(served: Served) -> Check:
    response = _post(served, "/v1/score", {"messages": _messages(CONTENT), "scoring": {"queries": [_options_query()]}})
    if response.status_code != 200:
        return _failed("options", response)
    got = {o["text"]: o for o in response.json()["results"][0]["combinations"][0]["options"]}
    total = sum(o["p"] for o in got.values())
    gap = max(abs(got[text]["logprob"] - want) for text, want in served.reference["options"].items())
    ok = abs(total - 1) < 1e-5 and gap <= served.tolerance
    return Check("options", ok, f"|logprob - transformers| {gap:.2e}, sum p {total:.6f}", gap)


def _slot(kind: str, query_id: str, template: str, field: str, **query) -> callable:
    def check(served: Served) -> Check:
        body = {"messages": _messages(CONTENT + " The charge was $30 on 12 September."),
                "scoring": {"queries": [{"id": query_id, "template": template, **query}]}}
        response = _post(served, "/v1/score", body)
        if response.status_code != 200:
            return _failed(kind, response)
        combination = response.json()["results"][0]["combinations"][0]
        return Check(kind, field in combination, f"{field}: {str(combination.get(field))[:60]!r}")
    check.__name__ = kind
    return check


text_slot = _slot("<*>", "month", '\n\nQ: Which month?\nA: "<*>"', "answers", max_tokens=4)
number_slot = _slot("<n>", "day", "\n\nQ: Which day?\nA: <n>", "answers", max_tokens=4)
amount_slot = _slot("<$>", "amount", "\n\nQ: How much money?\nA: <$>", "answers", max_tokens=6)
gen_slot = _slot("<gen>", "reply", "\n\nA reply to the customer:<gen>", "text", max_tokens=8)


def chat(served: Served) -> Check:
    body = {"messages": _messages(CONTENT), "max_tokens": 4, "scoring": {"queries": [_options_query()]}}
    response = _post(served, "/v1/chat/completions", body)
    if response.status_code != 200:
        return _failed("chat", response)
    answer = response.json()
    ok = bool(answer.get("choices")) and bool(answer.get("scoring"))
    return Check("chat", ok, f"text {answer['choices'][0]['message']['content']!r}, scoring {len(answer['scoring'])}")


def completions(served: Served) -> Check:
    body = {"prompt": PROMPT_IDS, "echo": True, "logprobs": 1, "max_tokens": 0}
    response = _post(served, "/v1/completions", body)
    if response.status_code != 200:
        return _failed("completions", response)
    got = response.json()["choices"][0]["logprobs"]["token_logprobs"]
    want = served.reference["token_logprobs"]
    if got[0] is not None or len(got) != len(want) + 1 or not all(math.isfinite(x) for x in got[1:]):
        return Check("completions", False, f"token_logprobs {got[:4]}... ({len(got)} for {len(want) + 1} tokens)")
    gap = max(abs(a - b) for a, b in zip(got[1:], want))
    return Check("completions", gap <= served.tolerance, f"|token logprob - transformers| {gap:.2e}", gap)


def decisions(served: Served) -> Check:
    body = {"messages": _messages(CONTENT), "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        "topic": {"type": "choice", "instructions": "What is the message about?",
                  "criteria": {"billing": "payments", "delivery": "parcels", "other": "anything else"}}}}
    response = _post(served, "/v1/decisions", body)
    if response.status_code != 200:
        return _failed("decisions", response)
    answers = response.json()["answers"]
    return Check("decisions", set(answers) == {"refund", "topic"}, f"answers {sorted(answers)}")


def _png(seed: int, width: int = 40, height: int = 28) -> bytes:
    from tests.media.snapshots import png

    return png(width, height, seed)


def image_part(seed: int) -> dict:
    from tests.media.snapshots import data_url

    return {"type": "image_url", "image_url": {"url": data_url(_png(seed))}}


def _media(kind: str, part_of) -> callable:
    """The options request on a content holding one part of `kind`: 200, and another part gives other scores."""
    def check(served: Served) -> Check:
        if kind not in served.media:
            return Check(kind, True, "not read by this family")
        scores = []
        for seed in (0, 1):
            content = [{"type": "text", "text": CONTENT}, part_of(seed)]
            response = _post(served, "/v1/score", {"messages": _messages(content),
                                                   "scoring": {"queries": [_options_query()]}})
            if response.status_code != 200:
                return _failed(kind, response)
            scores.append([o["logprob"] for o in response.json()["results"][0]["combinations"][0]["options"]])
        return Check(kind, scores[0] != scores[1], f"two {kind}s give {'other' if scores[0] != scores[1] else 'the same'}"
                     " scores")
    check.__name__ = kind
    return check


def _audio(seed: int) -> dict:
    from tests.media.snapshots import wav

    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(0.5, seed=seed)).decode(),
                                                   "format": "wav"}}


def _video(seed: int) -> dict:
    from tests.media.snapshots import data_url

    return {"type": "video", "video": [data_url(_png(seed * 10 + k, 24, 24)) for k in range(4)]}


image = _media("image", image_part)
audio = _media("audio", _audio)
video = _media("video", _video)


def packed(served: Served) -> Check:
    """A content's scores alone and packed with others (an image content beside them where the family reads
    images): bit-identical on CUDA, within 1e-5 on the CPU (its matmuls may round another pass's shape apart)."""
    scoring = {"queries": [_options_query(), {"id": "topic", "template": "\n\nTopic:<?>",
                                              "options": [" bill", " ship", " misc"]}]}
    target = {"messages": _messages(CONTENT)}
    others = [{"messages": _messages(text)} for text in OTHERS]
    if "image" in served.media:
        others.insert(1, {"messages": _messages([{"type": "text", "text": "Photo:"}, image_part(3)])})

    def scores(inputs: list[dict], index: int):
        response = _post(served, "/v1/score", {"inputs": inputs, "scoring": scoring})
        if response.status_code != 200:
            return response
        return [[o["logprob"] for o in c["options"]] for r in response.json()["inputs"][index]["results"]
                for c in r["combinations"]]

    alone = scores([target], 0)
    together = scores([*others[:2], target, *others[2:]], 2)
    for got in (alone, together):
        if isinstance(got, httpx.Response):
            return _failed("packed", got)
    gap = max(abs(a - b) for x, y in zip(alone, together) for a, b in zip(x, y))
    ok = alone == together if served.device == "cuda" else gap <= 1e-5
    return Check("packed", ok, f"alone vs packed: {gap:.1e}", gap)


KINDS = (options, text_slot, number_slot, amount_slot, gen_slot, chat, completions, decisions, image, audio, video,
         packed)
NAMES = tuple(kind.__name__ for kind in KINDS)


def run_all(served: Served) -> list[Check]:
    checks = []
    for kind in KINDS:
        try:
            checks.append(kind(served))
        except Exception as error:  # noqa: BLE001: a kind that breaks is reported, the others still run
            checks.append(Check(kind.__name__, False, f"{type(error).__name__}: {error}"[:300]))
    return checks
