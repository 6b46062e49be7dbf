"""The acceptance table: a row a family, a column a kind of request; `ok`, `FAIL` or `-` (not read by the family),
with the start-up time and whether the server's log held a traceback."""

from __future__ import annotations

from benchmarks.acceptance.kinds import NAMES


def passed(rows: list[dict]) -> bool:
    return all(not r.get("error") and not r["tracebacks"] and r["checks"] and all(c["ok"] for c in r["checks"])
               for r in rows)


def _cell(check: dict | None) -> str:
    if check is None:
        return "?"
    if check["detail"] == "not read by this family":
        return "-"
    return "ok" if check["ok"] else "FAIL"


def table(rows: list[dict]) -> str:
    head = ["family", "ready s", *NAMES, "log"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in sorted(rows, key=lambda r: r["family"]):
        by_kind = {c["kind"]: c for c in row["checks"]}
        cells = [_cell(by_kind.get(name)) for name in NAMES] if row["checks"] else ["-"] * len(NAMES)
        log = "traceback" if row["tracebacks"] else ("error" if row.get("error") else "clean")
        lines.append("| " + " | ".join([row["family"], str(row.get("ready_after") or "-"), *cells, log]) + " |")
    failures = [f"{row['family']} {c['kind']}: {c['detail']}" for row in rows for c in row["checks"] if not c["ok"]]
    errors = [f"{row['family']}: {row['error']}" for row in rows if row.get("error")]
    figures = [f"{row['family']} {c['kind']}: {c['detail']}" for row in rows for c in row["checks"]
               if c["ok"] and c.get("figure") is not None]
    return "\n".join(lines + ["", *errors, *failures, "", "measured:", *figures])
