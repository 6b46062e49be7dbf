"""Typed reading of a table (from TOML or JSON) that raises located errors: what key, what was wrong, what to do.

`Fields(data, path, where, error)` wraps one table. `where` says where a key path is: in a TOML file a line and
column (`TomlWhere`), in a JSON body the JSON path (`JsonWhere`: `<request>:scoring.queries[2].options`). The
same readers serve pack files and requests, so both give the same messages for the same mistakes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn, Protocol, TypeVar

from spinfc.errors import CompileError
from spinfc.frontend import mistakes
from spinfc.frontend.template import Locate, parse_template
from spinfc.frontend.tomlpos import TomlPositions
from spinfc.ir.nodes import SourceLoc, Template

KeyPath = tuple  # of str keys and int indices
T = TypeVar("T")


def dotted(path: KeyPath) -> str:
    """("scoring", "queries", 2, "options") -> "scoring.queries[2].options"."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class Where(Protocol):
    def loc(self, path: KeyPath, *, key: bool = False) -> SourceLoc: ...

    def string_locator(self, path: KeyPath, value: str) -> Locate | None: ...


class TomlWhere:
    def __init__(self, positions: TomlPositions) -> None:
        self.positions = positions

    def loc(self, path: KeyPath, *, key: bool = False) -> SourceLoc:
        return self.positions.loc(path, key=key)

    def string_locator(self, path: KeyPath, value: str) -> Locate | None:
        return self.positions.string_locator(path, value)


class JsonWhere:
    """A JSON body has no text to point into: a place is the JSON path; in a template, line and column in it."""

    def __init__(self, source: str) -> None:
        self.source = source

    def loc(self, path: KeyPath, *, key: bool = False) -> SourceLoc:
        return SourceLoc(f"{self.source}:{dotted(path)}" if path else self.source, 1, 1)

    def string_locator(self, path: KeyPath, value: str) -> Locate | None:
        return None


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a table",
}


class Fields:
    """One table and where it is; every reader either returns a checked value or raises `error` at the key."""

    def __init__(self, data: Any, path: KeyPath, where: Where, error: type[CompileError], noun: str = "table"):
        self.path, self.where, self.error = path, where, error
        if not isinstance(data, Mapping):
            self.fail(
                None,
                f"{dotted(path) or 'the body'} must be {noun}, not {_kind(data)}",
                code=mistakes.WRONG_TYPE,
                hint=f"write it as a {noun} of keys and values",
            )
        self.data: Mapping[str, Any] = data

    # -- where and failing ------------------------------------------------------------------------------------

    def key_path(self, key: str | int | None) -> KeyPath:
        return self.path if key is None else self.path + (key,)

    def loc(self, key: str | int | None = None, *, at_key: bool = False) -> SourceLoc:
        return self.where.loc(self.key_path(key), key=at_key)

    def problem(self, key, message: str, *, code: str, hint: str, at_key: bool = False) -> CompileError:
        """The error at `key`: a key, an index, a tuple of them below this table, or None for the table itself."""
        sub = key if isinstance(key, tuple) else ((key,) if key is not None else ())
        path = self.path + sub
        return self.error(message, self.where.loc(path, key=at_key), hint=hint, code=code, param=dotted(path) or None)

    def fail(self, key, message: str, *, code: str, hint: str, at_key: bool = False) -> NoReturn:
        """Raise `problem(...)`."""
        raise self.problem(key, message, code=code, hint=hint, at_key=at_key)

    # -- keys ---------------------------------------------------------------------------------------------------

    def has(self, key: str) -> bool:
        return key in self.data

    def check_keys(self, known: Iterable[str]) -> None:
        known = tuple(known)
        for key in self.data:
            if key not in known:
                message, hint = mistakes.unknown_field(key, known, dotted(self.path))
                self.fail(key, message, code=mistakes.UNKNOWN_FIELD, at_key=True, hint=hint)

    def require(self, key: str, what: str, example: str) -> Any:
        if key not in self.data:
            self.fail(None, f"missing `{key}` ({what})", code=mistakes.MISSING_FIELD,
                      hint=f"add it, e.g. {key} = {example}")
        return self.data[key]

    # -- values -------------------------------------------------------------------------------------------------

    def value(self, key: str, kind: type[T] | tuple, what: str, example: str, default: Any = ...) -> T:
        if key not in self.data and default is not ...:
            return default
        value = self.require(key, what, example)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            expected = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            self.fail(
                key,
                f"`{key}` must be {expected}, not {_kind(value)}",
                code=mistakes.WRONG_TYPE,
                hint=f"write it as {key} = {example}",
            )
        return value

    def string(self, key: str, what: str, example: str, *, pattern: str | None = None, default: Any = ...) -> str:
        value = self.value(key, str, what, example, default)
        if value is default:
            return value
        if pattern is not None and not re.fullmatch(pattern, value):
            self.fail(
                key,
                f"`{key}` = {value!r} is not a valid {what}",
                code=mistakes.INVALID_VALUE,
                hint=f"write it like {key} = {example}",
            )
        return value

    def number(self, key: str, what: str, example: str, default: Any = ...) -> float:
        return float(self.value(key, (int, float), what, example, default))

    def strings(self, key: str, what: str, example: str, *, unique: str = "duplicate_value") -> tuple[str, ...]:
        """A non-empty list of non-blank, distinct strings (`unique` is the code of a repeated one)."""
        items = self.value(key, list, what, example)
        if not items:
            self.fail(key, f"`{key}` is empty", code=mistakes.EMPTY_LIST,
                      hint=f"give at least one {what}, e.g. {example}")
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            if not isinstance(item, str):
                self.fail(
                    (key, index),
                    f"{what} {index + 1} must be a string, not {_kind(item)}",
                    code=mistakes.WRONG_TYPE,
                    hint=f"quote it, e.g. {example}",
                )
            if item in seen:
                self.fail(
                    (key, index),
                    f"{what} {item!r} is given twice (items {seen[item] + 1} and {index + 1})",
                    code=unique,
                    hint="remove the repeated one",
                )
            seen[item] = index
        return tuple(items)

    def table(self, key: str, what: str, example: str, default: Any = ...) -> Fields | None:
        value = self.value(key, dict, what, example, default)
        return None if value is default else Fields(value, self.key_path(key), self.where, self.error)

    def tables(self, key: str, what: str, example: str) -> list[Fields]:
        """A list of tables (`[[key]]` in TOML, a list of objects in JSON); missing means none."""
        items = self.value(key, list, what, example, default=[])
        return [Fields(item, self.key_path(key) + (i,), self.where, self.error, what) for i, item in enumerate(items)]

    def template(self, key: str, what: str, example: str, *, slots_allowed: int = 1) -> Template:
        source = self.string(key, what, example)
        path = self.key_path(key)
        locate = self.where.string_locator(path, source)
        loc = locate(0) if locate is not None else self.where.loc(path)
        try:
            return parse_template(source, loc, slots_allowed=slots_allowed, locate=locate)
        except CompileError as error:
            error.param = dotted(path)
            raise


def _kind(value: Any) -> str:
    for kind, name in _TYPE_NAMES.items():
        if type(value) is kind:
            return name
    return "null" if value is None else type(value).__name__


def collect(errors: list[CompileError], read: Callable[..., T], *args: Any) -> T | None:
    """Return `read(*args)`; a `CompileError` is appended to `errors` instead (and None returned), so reading
    can go on to the next question, category or rule."""
    try:
        return read(*args)
    except CompileError as error:
        errors.append(error)
        return None
