"""The calibration report: per label column a precision-recall curve and a reliability diagram (matplotlib PNGs),
and one HTML page with the table of chosen thresholds (precision, recall, support) and every figure.

    REPORT/index.html   REPORT/pr-<id>.png   REPORT/reliability-<id>.png   REPORT/thresholds.csv
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import attrs

from spinfc.calibrate.thresholds import Choice, Curve


@attrs.frozen
class Entry:
    kind: str  # "category" or "question"
    id: str
    curve: Curve
    choice: Choice
    bins: list  # (mean score, share positive, count)


def _name(entry: Entry) -> str:
    return f"{entry.kind}-{re.sub(r'[^0-9A-Za-z_.-]+', '_', entry.id)}"


def write_report(folder: Path, entries: list[Entry], provenance: dict[str, str]) -> Path:
    """Write the figures, the CSV table and index.html into `folder`; return the page's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        fig, ax = plt.subplots(figsize=(4, 3.4), dpi=100)
        ax.plot(entry.curve.recall, entry.curve.precision, marker=".", color="#2f6fb0")
        ax.plot([entry.choice.recall], [entry.choice.precision], "o", color="#d9480f",
                label=f"threshold {entry.choice.threshold:.3f}")
        ax.axhline(entry.curve.positives / max(entry.curve.rows, 1), color="#999", ls=":", lw=1, label="base rate")
        ax.set(xlim=(0, 1.02), ylim=(0, 1.02), xlabel="recall", ylabel="precision", title=f"{entry.id}: precision-recall")
        ax.legend(loc="lower left", fontsize=8)
        fig.tight_layout()
        fig.savefig(folder / f"pr-{_name(entry)}.png")
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(4, 3.4), dpi=100)
        ax.plot([0, 1], [0, 1], color="#999", ls=":", lw=1)
        if entry.bins:
            mean, share, count = zip(*entry.bins)
            ax.plot(mean, share, marker="o", color="#2f6fb0")
            for x, y, n in entry.bins:
                ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
        ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="score (bin mean)", ylabel="share labelled positive",
               title=f"{entry.id}: reliability")
        fig.tight_layout()
        fig.savefig(folder / f"reliability-{_name(entry)}.png")
        plt.close(fig)
    with open(folder / "thresholds.csv", "w", newline="") as file:
        out = csv.writer(file)
        out.writerow(["kind", "id", "threshold", "precision", "recall", "f1", "support", "rows", "target_met"])
        for e in entries:
            c = e.choice
            out.writerow([e.kind, e.id, f"{c.threshold:.6g}", f"{c.precision:.4f}", f"{c.recall:.4f}", f"{c.f1:.4f}",
                          c.support, c.rows, c.met])
    page = folder / "index.html"
    page.write_text(_page(entries, provenance), encoding="utf-8")
    return page


def _page(entries: list[Entry], provenance: dict[str, str]) -> str:
    e = html.escape
    facts = "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in provenance.items())
    rows = "".join(
        f"<tr><td>{e(x.kind)}</td><td>{e(x.id)}</td><td>{x.choice.threshold:.4f}</td><td>{x.choice.precision:.3f}</td>"
        f"<td>{x.choice.recall:.3f}</td><td>{x.choice.f1:.3f}</td><td>{x.choice.support}</td><td>{x.choice.rows}</td>"
        f"<td>{'yes' if x.choice.met else 'no'}</td></tr>" for x in entries)
    figures = "".join(
        f"<section><h3>{e(x.kind)} {e(x.id)}</h3><img src=\"pr-{e(_name(x))}.png\" alt=\"precision-recall of {e(x.id)}\">"
        f"<img src=\"reliability-{e(_name(x))}.png\" alt=\"reliability of {e(x.id)}\"></section>" for x in entries)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>spinfc calibration report</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}img{{margin:4px;border:1px solid #eee}}</style></head>
<body><h1>Calibration report</h1><table>{facts}</table>
<h2>Chosen thresholds</h2><table><tr><th>kind</th><th>id</th><th>threshold</th><th>precision</th><th>recall</th>
<th>F1</th><th>support</th><th>rows</th><th>target met</th></tr>{rows}</table>
<h2>Figures</h2>{figures}</body></html>
"""
