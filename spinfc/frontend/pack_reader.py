"""Read a pack file into a `Pack`, collecting every error of the file (each with file, line and column).

The TOML is parsed by `tomllib`; positions come from `TomlPositions`, so an error points at the key or value
(and inside a template, at the character) it is about. Reading goes on after an error, one question, category
or rule at a time, so `spinfc packs validate` can list every mistake of a file in one run.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from spinfc.errors import CompileError, PackError
from spinfc.frontend.fields import Fields, TomlWhere, collect, dotted
from spinfc.frontend.pack import Pack
from spinfc.frontend.pack_calibration import read_calibration
from spinfc.frontend.pack_categories import read_categories, read_decision
from spinfc.frontend.pack_files import read_pack_text
from spinfc.frontend.query import read_query
from spinfc.frontend.toml_limits import MAX_PACK_STRING_CHARS, long_string, nesting_problem
from spinfc.frontend.tomlpos import TomlPositions
from spinfc.ir.nodes import Placeholder, Query, SourceLoc, Text

PACK_KEYS = ("id", "version", "description", "models", "presentation", "questions", "categories", "decision",
             "calibration")
PACK_ID = r"[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*"
VERSION = r"\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?"


def read_pack(path: Path) -> tuple[Pack | None, list[CompileError]]:
    """The pack at `path` and no errors, or None and every error found in the file."""
    file = str(path)
    text, problem = read_pack_text(path)  # a regular file within the size cap, or why not
    if problem is None:
        problem = nesting_problem(text, file)  # before tomllib, which recurses once per level
    if problem is not None:
        return None, [problem]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return None, [_toml_error(error, file, text)]
    positions = TomlPositions(text, file)
    too_long = long_string(data)
    if too_long is not None:  # before any template is parsed
        path, length = too_long
        return None, [PackError(f"{dotted(path)} is {length:,} characters long, over the limit of "
                                f"{MAX_PACK_STRING_CHARS:,} for one string of a pack", positions.loc(path),
                                code="string_too_long", param=dotted(path),
                                hint="a question is a sentence or two; shorten it")]
    f = Fields(data, (), TomlWhere(positions), PackError)
    errors: list[CompileError] = []
    header = collect(errors, _header, f)
    queries = _questions(f, errors)
    categories = read_categories(f, queries, errors)
    calibration = collect(errors, read_calibration, f, {c.id for c in categories}, set(queries))
    decision = collect(errors, read_decision, f, {c.id for c in categories}, calibration)
    if errors or header is None:
        return None, errors
    return Pack(
        **header, queries=tuple(q for q in queries.values() if q), categories=categories, decision=decision, path=path,
        calibration=calibration,
    ), []


def _toml_error(error: tomllib.TOMLDecodeError, file: str, text: str) -> PackError:
    message = str(error)
    found = re.search(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$", message)
    if found and found[1]:
        loc = SourceLoc(file, int(found[1]), int(found[2]))
    else:  # at the end of the document
        loc = SourceLoc(file, text.count("\n") + 1, len(text) - text.rfind("\n"))
    return PackError(
        f"not valid TOML: {message[: found.start()] if found else message}",
        loc,
        code="toml_syntax",
        hint="quote every string (\"...\" or '...'), one key = value per line, [[questions]] before "
        "each question; see docs/packs.md",
    )


def _header(f: Fields) -> dict:
    f.check_keys(PACK_KEYS)
    header = {
        "id": f.string("id", "pack id (namespace/name)", '"acme/support-triage"', pattern=PACK_ID),
        "version": f.string("version", "version", '"1.0.0"', pattern=VERSION),
        "description": f.string("description", "description", '"What the pack is for, in one sentence."'),
        "models": f.strings("models", "model", '["gemma3-270m", "smollm2-135m"]'),
    }
    return header | _presentation(f)


def _presentation(f: Fields) -> dict:
    if not f.has("presentation"):
        return {"presentation_before": "", "presentation_after": ""}
    template = f.template("presentation", "presentation", '"Customer message:\\n{content}"', slots_allowed=0)
    holes = [p for p in template.parts if isinstance(p, Placeholder)]
    for hole in holes:
        if hole.name != "content":
            raise PackError(
                f"the presentation has no placeholder {{{hole.name}}}; it knows only {{content}}",
                hole.loc,
                code="unknown_placeholder",
                param="presentation",
                hint="write {content} where the content goes; \\{ for a literal {",
            )
    if len(holes) != 1:
        raise PackError(
            f"the presentation must hold {{content}} exactly once, not {len(holes)} times",
            holes[1].loc if holes else f.loc("presentation"),
            param="presentation",
            code="missing_content" if not holes else "duplicate_content",
            hint='write it once where the content goes: presentation = "Customer message:\\n{content}"',
        )
    at = template.parts.index(holes[0])
    return {"presentation_before": _text(template.parts[:at]), "presentation_after": _text(template.parts[at + 1 :])}


def _text(parts) -> str:
    return "".join(p.text for p in parts if isinstance(p, Text))


def _questions(f: Fields, errors: list[CompileError]) -> dict[str, Query | None]:
    """Question id -> query; None for a question whose id is known but which has an error (not reported twice)."""
    tables = collect(errors, f.tables, "questions", "question", "[[questions]]")
    if tables == []:
        errors.append(
            f.problem(
                None,
                "the pack has no questions",
                code="no_questions",
                hint="add one: [[questions]] with id, template and options",
            )
        )
    queries: dict[str, Query | None] = {}
    for q in tables or []:
        query = collect(errors, read_query, q)
        query_id = query.id if query else q.data.get("id")
        if isinstance(query_id, str) and query_id in queries:
            errors.append(
                q.problem(
                    "id",
                    f"question id {query_id!r} is used twice",
                    code="duplicate_id",
                    hint="give each question its own id",
                )
            )
        elif isinstance(query_id, str):
            queries[query_id] = query
    return queries


def load_pack(path: str | Path) -> Pack:
    """Read and check the pack file at `path`; raise the first `PackError`/`TemplateError` (file, line, column).

    `read_pack` gives every error of the file instead (what `spinfc packs validate` prints)."""
    pack, errors = read_pack(Path(path))
    if errors:
        raise errors[0]
    assert pack is not None
    return pack
