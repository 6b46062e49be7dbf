"""How well the packaged models answer a bundled pack's questions out of the box, on hand-labelled messages.

    python -m benchmarks.first_answers [--models gemma3-270m smollm2-135m] [--rows 40] [--moderation]
                                       [--json benchmarks/results/first_answers_cpu.json]

For each packaged model, each prompt style and each way of reading the scores, on the first --rows rows (40) of the
labelled files of fixtures/labelled/ (support-triage.jsonl: one of each of its 40 message kinds, so 40 independent
examples; with --moderation also moderation.jsonl: 40 of its 48, every category with 6 or 7 positives but
illegal_drugs with 4), through the engine a server runs (the same model loading, pass shapes, compile and passes:
`spinfc.runtime.start.start_engine`):

  prompt   plain: the pack as shipped (its presentation, then each question, then `Answer:`, all plain text, which is
           how /v1/score reads every content);
           chat:  the same words inside the model's chat turn: the user turn opens before the presentation and
           closes after the question, and `Answer:` starts the model's turn (SmolLM2-135M-Instruct's own chat
           template; Gemma 3's turn format for the Gemma 3 270M base model, which has no template of its own).
           Control tokens cannot be written in a request's text (spinfc encodes them as text), so this script hands
           the engine a tokenizer that reads them as control tokens.
  score    p:     each question's probability as it is, the categories combining p (baseline "none");
           lift:  the pack as shipped: each category counts max(0, (p - floor_p) / (1 - floor_p));
           ratio: each question's option probabilities divided by their floor_p and renormalised ("Calibrate
                  Before Use", `spinfc calibrate --correct floor`), then combined as p.

Per label column (a category of the pack, or a question: `cannot_log_in`) the ROC AUC (how well the score ranks
positives above negatives, whatever the threshold: 0.5 is chance) and the F1 at the threshold the pack's decision
uses for that category (0.5 for a question); the decision's accuracy against the label a person's labels lead to
(the pack's own rules applied to the labels as scores of 1 and 0; a category without a label column counts 0); the
share of rows that got the decision's default; and the p(yes) of the refund question on "I was charged twice for
January. Please refund one of the charges." A positive count under ten makes an AUC move by 0.05 or more from one
sample to another: read the table as which way and how far, not as a score to two decimals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import attrs

from benchmarks.harness.serving import ROOT
from spinfc.config import EngineSettings
from spinfc.frontend import load_pack
from spinfc.ir.nodes import Content, Program
from spinfc.runtime.deliver.pack_scores import decide, lift, score_pack
from spinfc.runtime.admit.request_packs import add_packs, split_results

GEMMA_TURN = ("<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n")
FILES = {"support-triage": ("fixtures/labelled/support-triage.jsonl", "packs/support-triage.toml"),
         "moderation": ("fixtures/labelled/moderation.jsonl", "packs/moderation.toml")}
REFUND_TEXT = "I was charged twice for January. Please refund one of the charges."


class ControlTokens:
    """The model's tokenizer, reading control-token spellings (`<start_of_turn>`) as the control tokens."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text, **kwargs):
        kwargs["split_special_tokens"] = False
        return self.tokenizer(text, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def chat_turn(tokenizer) -> tuple[str, str]:
    """(what opens the user's turn, what closes it and opens the model's) in the model's chat format."""
    if not getattr(tokenizer, "chat_template", None):
        return GEMMA_TURN
    marker = "@@CONTENT@@"
    text = tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                         add_generation_prompt=True)
    before, after = text.split(marker)
    adds_bos = tokenizer("x", add_special_tokens=True)["input_ids"][:1] == [tokenizer.bos_token_id]
    return (before.removeprefix(tokenizer.bos_token) if adds_bos else before), after  # the content adds its BOS


def toml_text(text: str) -> str:
    """`text` inside a TOML basic string, with `<` escaped for the template grammar (a control token is text)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("<", "\\\\<")


def chat_pack(path: Path, turn: tuple[str, str], folder: Path) -> Path:
    """The pack file at `path` with its questions inside the model's chat turn (see the module docstring)."""
    opens, closes = turn
    source = path.read_text()
    presentation = re.search(r'^presentation = "(.*)"$', source, re.M)
    source = source.replace(presentation.group(0), f'presentation = "{toml_text(opens)}{presentation.group(1)}"')
    answer = '\\nAnswer:<?>"'
    assert answer in source, f"{path}: no question ends with Answer:<?>"
    source = source.replace(answer, toml_text(closes) + 'Answer:<?>"')
    out = folder / path.name
    out.write_text(source)
    return out


def with_baseline(pack, baseline: str):
    return attrs.evolve(pack, categories=tuple(attrs.evolve(c, baseline=baseline) for c in pack.categories))


def ratio(answers: dict, floors: dict) -> dict:
    """Each question's option probabilities divided by their floor_p, renormalised."""
    out = {}
    for key, probs in answers.items():
        divided = {o: p / max(floors[key][o], 1e-12) for o, p in probs.items()}
        total = sum(divided.values())
        out[key] = {o: v / total for o, v in divided.items()}
    return out


def auc(scores: list[float], labels: list[int]) -> float | None:
    """ROC AUC by ranks (ties count half); None where one class is missing."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def f1(scores: list[float], labels: list[int], threshold: float) -> float:
    tp = sum(s >= threshold and y for s, y in zip(scores, labels))
    fp = sum(s >= threshold and not y for s, y in zip(scores, labels))
    fn = sum(s < threshold and y for s, y in zip(scores, labels))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def thresholds(pack) -> dict[str, float]:
    """The threshold the pack's decision uses for each category (its first condition on it)."""
    out = {}
    for rule in pack.decision.rules if pack.decision else ():
        for condition in rule.conditions:
            out.setdefault(condition.category, condition.threshold)
    return out


async def score_rows(engine, pack, texts: list[str]):
    """Per row: (the pack's question answers p, their floor_p) as `score_pack` reads them."""
    contents = tuple(Content(f"input-{i}", t) for i, t in enumerate(texts))
    plan = add_packs(Program(model=engine.model.name, contents=contents, queries=()), [pack])
    scored = await engine.score(await engine.compile_program_async(plan.program))
    rows = []
    for results in await asyncio.to_thread(scored.results):
        _, (packed,) = split_results(results, plan)
        p, floor = {}, {}
        for result in packed.results:
            for combination in result.combinations:
                key = (result.id, tuple(combination.values.items()))
                p[key] = {o.text: o.p for o in combination.options}
                floor[key] = {o.text: o.floor_p for o in combination.options}
        rows.append((p, floor))
    return rows


def truth_labels(pack, labelled: list[dict]) -> list[str]:
    """The decision a person's labels lead to: the pack's rules on the labels as scores (1 or 0; a category with no
    label column 0)."""
    category_ids = {c.id for c in pack.categories}
    return [decide(pack.decision, {c: float(row.get(c, 0)) for c in category_ids})[0] for row in labelled]


def measure(pack, rows, labelled: list[dict]) -> dict:
    """The table's numbers for one (model, prompt) run, for each way of reading the scores."""
    columns = [c for c in labelled[0] if c not in ("id", "text")]
    cut = thresholds(pack)
    category_ids = {c.id for c in pack.categories}
    truth = truth_labels(pack, labelled)
    out = {"majority_share": max(map(truth.count, truth)) / len(truth)}
    for way in ("p", "lift", "ratio"):
        scored_pack = pack if way == "lift" else with_baseline(pack, "none")
        per_row = []
        for p, floor in rows:
            answers = ratio(p, floor) if way == "ratio" else p
            scores = dict(score_pack(scored_pack, answers, floor).categories)
            for column in columns:
                if column not in category_ids:  # a question: its first option's p (lift: over its floor)
                    (key,) = [k for k in p if k[0] == column]
                    first = next(iter(p[key]))
                    value = answers[key][first]
                    scores[column] = lift(value, floor[key][first]) if way == "lift" else value
            per_row.append(scores)
        table = {}
        for column in columns:
            labels = [int(row[column]) for row in labelled]
            values = [scores[column] for scores in per_row]
            table[column] = {"auc": auc(values, labels), "f1": f1(values, labels, cut.get(column, 0.5)),
                             "positives": sum(labels)}
        decisions = [decide(scored_pack.decision, scores)[0] for scores in per_row]
        aucs = [v["auc"] for v in table.values() if v["auc"] is not None]
        out[way] = {"columns": table, "mean_auc": statistics.mean(aucs),
                    "mean_f1": statistics.mean(v["f1"] for v in table.values()),
                    "decision_accuracy": sum(d == t for d, t in zip(decisions, truth)) / len(truth),
                    "default_share": sum(d == pack.decision.default for d in decisions) / len(truth),
                    "decisions": decisions}
    return out


async def run_model(name: str, files: list[str], rows_wanted: int) -> dict:
    from spinfc.runtime.engine import Engine
    from spinfc.runtime.start import start_engine

    started = time.perf_counter()
    base = await asyncio.to_thread(start_engine, EngineSettings(model=name, device="cpu"))
    model, shapes = base.model, base.shapes
    await asyncio.to_thread(base.stop)  # its model and shapes serve an engine whose tokenizer reads control tokens
    tokenizer = ControlTokens(model.tokenizer)
    engine = Engine(model, shapes, device="cpu", tokenizer=tokenizer).start()
    turn = chat_turn(model.tokenizer)
    print(f"{name}: loaded in {time.perf_counter() - started:.0f} s; chat turn {turn!r}", flush=True)
    results = {"chat_turn": list(turn)}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for file in files:
                data, pack_file = FILES[file]
                labelled = [json.loads(line) for line in (ROOT / data).read_text().splitlines()][:rows_wanted]
                texts = [row["text"] for row in labelled]
                for style in ("plain", "chat"):
                    path = ROOT / pack_file if style == "plain" else chat_pack(ROOT / pack_file, turn, Path(folder))
                    pack = load_pack(path)
                    started = time.perf_counter()
                    rows = await score_rows(engine, pack, texts + [REFUND_TEXT])
                    seconds = time.perf_counter() - started
                    refund = rows[-1][0][("refund_request", ())][" yes"] if file == "support-triage" else None
                    result = measure(pack, rows[:-1], labelled)
                    result["seconds"], result["refund_p_yes"] = seconds, refund
                    results[f"{file}/{style}"] = result
                    print(f"{name} {file} {style}: {len(texts)} rows in {seconds:.0f} s; " + "; ".join(
                        f"{way} AUC {r['mean_auc']:.3f} F1 {r['mean_f1']:.3f} decision {r['decision_accuracy']:.2f} "
                        f"default {r['default_share']:.2f}" for way, r in result.items()
                        if way in ("p", "lift", "ratio"))
                        + (f"; refund p(yes) {refund:.3f}" if refund is not None else ""),
                        flush=True)
    finally:
        await asyncio.to_thread(engine.close)
    return results


def markdown(out: dict) -> str:
    """The BENCHMARKS.md table of a run: one row per (file, model, prompt, score)."""
    lines = ["| labelled file | model | prompt | score | mean AUC | mean F1 at the pack's thresholds | decision "
             "right (always the commonest label) | decision = default | refund p(yes) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for model, runs in out.items():
        for key, run in runs.items():
            if key == "chat_turn":
                continue
            file, style = key.split("/")
            for way in ("p", "lift", "ratio"):
                r = run[way]
                refund = f"{run['refund_p_yes']:.2f}" if run["refund_p_yes"] is not None else ""
                lines.append(f"| {file} | {model} | {style} | {way} | {r['mean_auc']:.3f} | {r['mean_f1']:.3f} | "
                             f"{r['decision_accuracy']:.0%} ({run['majority_share']:.0%}) | {r['default_share']:.0%} | "
                             f"{refund} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["gemma3-270m", "smollm2-135m"])
    parser.add_argument("--rows", type=int, default=40, help="the first ROWS rows of each labelled file")
    parser.add_argument("--moderation", action="store_true", help="also moderation.jsonl (its first ROWS rows)")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--table", help="print the table of an earlier run's --json file, and run nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown(json.loads(Path(args.table).read_text())))
        return
    files = ["support-triage"] + (["moderation"] if args.moderation else [])
    out = {name: asyncio.run(run_model(name, files, args.rows)) for name in args.models}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(markdown(out))


if __name__ == "__main__":
    main()
