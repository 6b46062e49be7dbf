"""docs/api.md's error table names every code a request can get: each `code="..."`, `ApiError(status, "...")`,
`Refused("...")` and error class's `CODE = "..."` of the modules a request goes through, the decisions validator's
codes, the shared mistakes and every limit's `<limit>_exceeded`."""

from __future__ import annotations

import re
from pathlib import Path

from spinfc.config.limits import ERROR_CODES
from spinfc.frontend import mistakes

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "api.md").read_text()
REQUEST_PATH = ["spinfc/server", "spinfc/frontend/request.py", "spinfc/frontend/query.py",
                "spinfc/frontend/fields.py", "spinfc/frontend/template.py", "spinfc/frontend/syntax.py",
                "spinfc/frontend/json_body.py", "spinfc/runtime/decisions", "spinfc/runtime/engine.py",
                "spinfc/runtime/launch/generate.py", "spinfc/passes", "spinfc/config/limits.py", "spinfc/media",
                "spinfc/runtime/towers", "spinfc/frontend/content_parts.py", "spinfc/runtime/admit/request_packs.py",
                "spinfc/runtime/admit/limits.py", "spinfc/runtime/admit/intake.py", "spinfc/errors.py"]
RAISED = re.compile(r'code="([a-z_]+)"|ApiError\(\s*\d+,\s*"([a-z_]+)"|Refused\(\s*"([a-z_]+)"|CODE = "([a-z_]+)"')
DECISION = re.compile(r'"((?:missing|wrong|invalid|unknown|duplicate|state|unsupported)_[a-z_]+)"')


def codes() -> set[str]:
    found = set(ERROR_CODES.values()) | {getattr(mistakes, name) for name in dir(mistakes) if name.isupper()
                                         and isinstance(getattr(mistakes, name), str) and name.endswith(
                                             ("FIELD", "TYPE", "VALUE", "LIST"))}
    for entry in REQUEST_PATH:
        path = ROOT / entry
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            text = file.read_text()
            found |= {next(g for g in match if g) for match in RAISED.findall(text)}
            if "decisions" in str(file):
                found |= set(DECISION.findall(text))
    return found


def test_every_error_code_is_in_the_error_table() -> None:
    missing = sorted(code for code in codes() if f"`{code}`" not in DOC)
    assert not missing, f"docs/api.md does not list: {', '.join(missing)}"
    assert len(codes()) > 60
