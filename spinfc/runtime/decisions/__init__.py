"""/v1/decisions (alias /v1/systemone): typed questions over one shared state, answered from one read of it.

    {"state": "...",                       or "messages": [{"role": "user", "content": "..."}]
                                           (content parts too: text, image_url, input_audio, video_url, video)
     "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        "topic":  {"type": "choice", "instructions": "What is the message about?",
                   "criteria": {"billing": "charges, invoices, refunds", "technical": "something broken"}},
        "anger":  {"type": "score", "instructions": "How angry is the customer?",
                   "criteria": ["calm", "annoyed", "angry", "furious"]}}}

Each question becomes one /v1/score query (`decision_queries`): an instruction, the options or levels listed with
single-token labels (" A".." Z"; " 1".." 9"; fixed-width numbers beyond, so that no label is a prefix of
another), and an option slot over the labels. The engine scores them as branches of one read of the state;
`decision_answers` turns the label probabilities into answers:

    noul    answer = P(true) (" yes" against " no")
    choice  answer = the most probable key; probabilities per key; confidence = normalised Gini (below)
    score   answer = expected level index (0-based, sum of i * p_i); level = the most probable index; legend = the
            level descriptions; probabilities per level; confidence = normalised Gini

Against a decision model (its head reads codes: runtime/weights/decision_head.py) only a choice is asked, over the
model's own codes: its criteria's keys are codes of the model (their descriptions listed in the template), or it
has no criteria and is read over every code; each question is one query with `codes` instead of options (1 to 255
reads of the head, so a large set runs in rounds like any other). noul and score ask for text labels, which a
decision model does not read: refused (options_on_decision_model).

Normalised Gini confidence of probabilities p over K options: (sum p_i^2 - 1/K) / (1 - 1/K), 1 when all mass is on
one option, 0 when it is spread evenly (1 when K = 1). For noul it is (2p - 1)^2. `floor` is the same answer on
empty content (from floor_p); `residual` is the mass the model put outside the labels. Nothing is generated:
usage.output_tokens is always 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from spinfc.runtime.decisions.validate import DecisionError, validate_decision_request  # noqa: F401 (re-exported)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def escape_template_text(text: str) -> str:
    """`text` as literal template text: `\\`, `<` and `{` escaped (frontend/template.lark), so user wording can
    never open a slot or a placeholder."""
    return text.replace("\\", "\\\\").replace("<", "\\<").replace("{", "\\{")


def choice_labels(count: int) -> list[str]:
    """Labels of `count` options: " A".." Z" up to 26, else " 01".." 99" / " 001".." 255" (fixed width: no
    label is a prefix of another, so each label's probability is its own)."""
    if count <= len(LETTERS):
        return [f" {LETTERS[i]}" for i in range(count)]
    width = len(str(count))
    return [f" {i:0{width}d}" for i in range(1, count + 1)]


def level_labels(count: int) -> list[str]:
    """Labels of `count` ordered levels: " 1".." 9" up to 9 (one digit, one token), else " 01".." 50"."""
    width = 1 if count <= 9 else 2
    return [f" {i:0{width}d}" for i in range(1, count + 1)]


def _question_text(instructions: str) -> str:
    return f"\n\nQuestion: {escape_template_text(instructions.strip())}\n"


def _template(question: Mapping, codes: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The template (after the content) and the option labels of one validated question; against a decision model
    (`codes`), a choice's labels are its codes (the criteria's keys, or every code)."""
    kind, criteria = question["type"], question.get("criteria")
    text = _question_text(question["instructions"])
    if codes:
        return _code_template(text, criteria), list(criteria or codes)
    if kind == "noul":
        if criteria and criteria.strip():
            text += f"Criteria: {escape_template_text(criteria.strip())}\n"
        return text + "Answer yes or no.\nAnswer:<?>", [" yes", " no"]
    if kind == "choice":
        labels = choice_labels(len(criteria))
        text += "Options:\n"
        for label, (key, description) in zip(labels, criteria.items()):
            line = f"{key}: {description.strip()}" if description.strip() else key
            text += f"{label.strip()}. {escape_template_text(line)}\n"
        what = "letter" if len(criteria) <= len(LETTERS) else "number"
        return text + f"Answer with the {what} of the best option.\nAnswer:<?>", labels
    labels = level_labels(len(criteria))
    text += "Levels, from the lowest to the highest:\n"
    for label, description in zip(labels, criteria):
        text += f"{label.strip()}. {escape_template_text(description.strip())}\n"
    return text + "Answer with the number of the level that fits best.\nAnswer:<?>", labels


def _code_template(text: str, criteria: Mapping | None) -> str:
    """A choice's template for a decision model: the question, its codes' descriptions where it gives any, and the
    slot where the head reads the codes."""
    described = {code: description.strip() for code, description in (criteria or {}).items() if description.strip()}
    if described:
        text += "Options:\n" + "".join(f"{escape_template_text(f'{code}: {description}')}\n"
                                        for code, description in described.items())
    return text + "Answer:<?>"


def decision_queries(body: Mapping, extra_keys: Iterable[str] = (), codes: tuple[str, ...] = ()) -> list[dict]:
    """The /v1/score queries (`{"id", "template", "options"}`, one per question, ids = question ids) that answer
    the request's questions; against a decision model (`codes`: its head's labels), `{"id", "template", "codes"}`.
    Validates `body` first (raises `DecisionError`); `extra_keys` are top-level fields the server reads itself (a
    trusted caller's `limits`, `features`)."""
    validate_decision_request(body, extra_keys, codes)
    queries = []
    for question_id, question in body["questions"].items():
        template, labels = _template(question, codes)
        if codes:
            queries.append({"id": question_id, "template": template, "codes": list(question.get("criteria") or ())
                            or "all"})
        else:
            queries.append({"id": question_id, "template": template, "options": labels})
    return queries


def decision_messages(body: Mapping) -> list[dict]:
    """The content to read, as chat messages: `messages` as given, or `state` as one user message."""
    if body.get("messages") is not None:
        return list(body["messages"])
    return [{"role": "user", "content": body["state"]}]


def gini_confidence(probabilities: Iterable[float]) -> float:
    """Normalised Gini confidence in [0, 1]: (sum p^2 - 1/K) / (1 - 1/K); 1.0 for K <= 1."""
    ps = list(probabilities)
    k = len(ps)
    if k <= 1:
        return 1.0
    value = (sum(p * p for p in ps) - 1.0 / k) / (1.0 - 1.0 / k)
    return min(1.0, max(0.0, value))


def _label_probabilities(result: Mapping, labels: list[str], question_id: str, field: str) -> list[float | None]:
    combination = result["combinations"][0]
    by_text = {option["text"]: option.get(field) for option in combination["options"]}
    if set(by_text) != set(labels):
        raise ValueError(f"the scores of question {question_id!r} are for options {sorted(by_text)}, not the "
                         f"labels {labels} that decision_queries asked: pass the engine's results unchanged")
    return [by_text[label] for label in labels]


def _answer(question: Mapping, result: Mapping, labels: list[str], question_id: str) -> dict:
    p = _label_probabilities(result, labels, question_id, "p")
    floor = _label_probabilities(result, labels, question_id, "floor_p")
    has_floor = all(f is not None for f in floor)
    residual = result["combinations"][0].get("residual")
    kind, criteria = question["type"], question.get("criteria")
    if kind == "noul":
        return {"type": "noul", "answer": p[0], "probabilities": {"true": p[0], "false": p[1]},
                "confidence": gini_confidence(p), "floor": floor[0] if has_floor else None, "residual": residual}
    if kind == "choice":
        keys = labels if criteria is None else list(criteria)  # a decision model's codes
        best = max(range(len(keys)), key=lambda i: (p[i], -i))  # the first key wins a tie
        return {"type": "choice", "answer": keys[best], "probabilities": dict(zip(keys, p)),
                "confidence": gini_confidence(p), "floor": dict(zip(keys, floor)) if has_floor else None,
                "residual": residual}
    level = max(range(len(p)), key=lambda i: (p[i], -i))
    return {"type": "score", "answer": sum(i * pi for i, pi in enumerate(p)), "level": level,
            "legend": list(criteria), "probabilities": p, "confidence": gini_confidence(p),
            "floor": sum(i * f for i, f in enumerate(floor)) if has_floor else None, "residual": residual}


def _builtins(result):
    """A query result as plain dicts: the engine's msgspec structs (runtime.results.QueryResult) or dicts."""
    return result if isinstance(result, Mapping) else msgspec.to_builtins(result)


def decision_answers(body: Mapping, scored: Iterable[Mapping] | Mapping[str, Mapping], *, model: str | None = None,
                     input_tokens: int = 0, codes: tuple[str, ...] = ()) -> dict:
    """The /v1/decisions response for `body` given `scored`, the engine's results for `decision_queries(body)`
    on this body's content (each `{"id", "combinations": [{"values", "options": [{"text", "p", "floor_p", ...}],
    "residual"}]}`, as dicts or `runtime.results.QueryResult` structs, in a list or a map by id); `codes`: the
    decision model's, as given to `decision_queries`. The server adds `id`, `created` and `system_fingerprint`."""
    if isinstance(scored, Mapping):
        results = {key: _builtins(r) for key, r in scored.items()}
    else:
        results = {r["id"]: r for r in map(_builtins, scored)}
    answers = {}
    for question_id, question in body["questions"].items():
        if question_id not in results:
            raise ValueError(f"no scores for question {question_id!r}: score every query of decision_queries")
        _, labels = _template(question, codes)
        answers[question_id] = _answer(question, results[question_id], labels, question_id)
    return {"object": "decision", "model": model, "answers": answers,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0, "total_tokens": input_tokens}}
