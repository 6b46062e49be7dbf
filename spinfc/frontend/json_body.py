"""A JSON body checked against a msgspec type, cheapest check first, every mistake a located `RequestError`:

    check_depth(raw)         nesting bounded on the raw bytes, before any decoder recurses (400 too_deeply_nested)
    decode_body(raw, T)      bytes -> T: depth, then msgspec's strict decode (no "5" read as 5); malformed JSON is
                             invalid_json with line and column
    read_json(raw)           bytes -> plain JSON values: depth, then msgspec's decoder (`spinfc compile` reads files so)
    convert_body(obj, T)     decoded JSON -> T, strictly (program_from_request checks every body so)

msgspec validates; this file only words what it found (mistakes.py codes) and finds where: msgspec names a value
inside a dict as `[...]`, so the key is looked up here, giving `questions.refund.type` rather than a guess.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import msgspec

from spinfc.errors import RequestError
from spinfc.frontend import mistakes
from spinfc.ir.nodes import SourceLoc

MAX_DEPTH = 32  # levels of objects and arrays; the deepest spinfc body (inputs > messages > content parts) has 7
_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')  # deleted: all but brackets and quotes
_ESCAPED = re.compile(rb'\\[\\"]')  # the escapes that matter to strings' ends, read left to right as JSON does
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # bracket -> its step + 1 (what is left is brackets only)
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[(\.\.\.)\]")
_LOOSE = msgspec.json.Decoder(float_hook=Decimal)  # locating only: a number past float range is still a value
UNREAD = object()  # the value is not needed to word the mistake: the body is not decoded a second time
_WORDED_WITHOUT_VALUES = ("Object contains unknown field", "Object missing required field")


def nesting_depth(raw: bytes) -> int:
    """How deep objects and arrays nest in `raw` (JSON text, well-formed or not), without decoding it: brackets
    inside strings do not count (nor any after a string left open). In C but for the last step: the escapes that
    could hide a quote (an escaped backslash or quote) go, then every byte but brackets and quotes, then what
    lies between quotes; numpy sums the brackets left (~60 us for the 72 kB of the seed-shaped job, was ~210)."""
    import numpy as np

    text = _ESCAPED.sub(b"", raw) if b"\\" in raw else raw  # without them, every quote opens or closes a string
    brackets = b"".join(text.translate(None, _STRUCTURE).split(b'"')[::2])  # outside strings (an open one: to the end)
    if not brackets:
        return 0
    steps = np.frombuffer(brackets.translate(_STEP), dtype=np.int8).astype(np.int32) - 1  # [ { +1, ] } -1
    return int(max(0, np.cumsum(steps).max()))


def check_depth(raw: bytes, source: str = "<request>") -> None:
    """400 too_deeply_nested when objects and arrays nest deeper than MAX_DEPTH: checked on the raw bytes, before
    any decoder recurses into them."""
    depth = nesting_depth(raw)
    if depth > MAX_DEPTH:
        raise RequestError(f"the body nests objects and arrays {depth:,} levels deep, more than the {MAX_DEPTH} "
                           "this server reads", SourceLoc(source), code="too_deeply_nested",
                           hint="no spinfc body needs more than 7 levels: send the documented shape (docs/api.md)")


def decode_body(raw: bytes, kind: type, source: str = "<request>") -> Any:
    """`raw` as `kind`, strictly; raises `RequestError` (too_deeply_nested, invalid_json, or a field's mistake)."""
    check_depth(raw, source)
    try:
        return msgspec.json.decode(raw, type=kind, strict=True)
    except msgspec.ValidationError as error:
        obj = UNREAD
        if _needs_values(str(error)):  # decoded again, untyped, to find the value at fault
            try:
                obj = _LOOSE.decode(raw)
            except msgspec.DecodeError as later:  # malformed JSON further on is the first thing to fix
                raise malformed(str(later), raw, source) from None
        raise located(error, obj, kind, source) from None
    except msgspec.DecodeError as error:
        raise malformed(str(error), raw, source) from None


def read_json(raw: bytes, source: str = "<request>") -> Any:
    """`raw` decoded to plain JSON values (for `convert_body` later): depth first, then msgspec's decoder."""
    check_depth(raw, source)
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        raise malformed(str(error), raw, source) from None


def convert_body(obj: Any, kind: type, source: str = "<request>") -> Any:
    """Decoded JSON `obj` as `kind`, strictly; raises `RequestError` naming the field at fault."""
    try:
        return msgspec.convert(obj, kind, strict=True)
    except msgspec.ValidationError as error:
        raise located(error, obj, kind, source) from None


def _needs_values(text: str) -> bool:
    """Whether wording msgspec's `text` needs the values: a key behind `[...]`, or a value to show."""
    wrong_type = text.startswith("Expected `") and ", got `" in text
    return "[...]" in text or not (wrong_type or text.startswith(_WORDED_WITHOUT_VALUES))


def malformed(reason: str, raw: bytes, source: str) -> RequestError:
    """invalid_json, at the line and column of the byte msgspec stopped at."""
    match = re.search(r"\(byte (\d+)\)", reason)
    offset = int(match.group(1)) if match else len(raw)
    line = raw.count(b"\n", 0, offset) + 1
    column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
    reason = re.sub(r"^JSON is malformed: | \(byte \d+\)$", "", reason)
    return RequestError(f"the body is not valid JSON: {reason} at line {line}, column {column}",
                        SourceLoc(source, line, column), code="invalid_json",
                        hint="send one JSON object (Content-Type: application/json); check the quotes, commas and "
                        "brackets at that place")


def located(error: msgspec.ValidationError, obj: Any, kind: type, source: str) -> RequestError:
    """The mistake msgspec found, at its JSON path, in the words of mistakes.py (msgspec's own words, with its
    path, should the wording ever fail on a shape not foreseen here: a 400 either way, never a 500)."""
    try:
        return _located(error, obj, kind, source)
    except Exception:  # noqa: BLE001
        return RequestError(f"{error}", SourceLoc(source), code=mistakes.INVALID_VALUE,
                            hint="see docs/api.md for the body's fields and types")


def _located(error: msgspec.ValidationError, obj: Any, kind: type, source: str) -> RequestError:
    match = _AT.match(str(error))
    what, path = match.group("what"), match.group("path") or ""
    parts, value, annotation = _walk(obj, kind, path)
    param = mistakes.json_path(parts)
    names = re.findall(r"`([^`]*)`", what)
    if what.startswith("Object contains unknown field"):
        message, hint = mistakes.unknown_field(names[0], _field_names(annotation, value), param)
        code, param = mistakes.UNKNOWN_FIELD, mistakes.json_path([*parts, names[0]])
    elif what.startswith("Object missing required field"):
        message, hint = mistakes.missing_field(names[0], param, _example(_field_type(annotation, names[0])))
        code, param = mistakes.MISSING_FIELD, mistakes.json_path([*parts, names[0]])
    elif what.startswith("Expected") and ", got" in what:
        message, hint = mistakes.wrong_type(param, _expected(names[0]), _JSON_KINDS.get(names[1], names[1]))
        code = mistakes.WRONG_TYPE
    elif "of length >= 1" in what and isinstance(value, list):
        item = _example(typing.get_args(annotation)[0]) if typing.get_args(annotation) else None
        code, message = mistakes.EMPTY_LIST, f"{mistakes.where(param)} is empty"
        hint = f"give at least one item, e.g. [{item}]" if item else "give at least one item"
    else:  # a bound (ge, le, length), an enum value, a number past float range
        code, message, hint = mistakes.INVALID_VALUE, *_invalid(param, what, value, annotation)
    return RequestError(message, SourceLoc(f"{source}:{param}" if param else source), code=code,
                        param=param or None, hint=hint)


def _walk(obj: Any, kind: Any, path: str) -> tuple[list, Any, Any]:
    """Follow msgspec's path (`.name`, `[3]`, `[...]`) through `obj` and the type: the JSON path with real keys,
    the value there and its annotation. A `[...]` is the first entry of that object that does not convert (msgspec
    checks entries in order and stops at the first)."""
    parts: list = []
    value, annotation = obj, kind
    for name, index, any_key in _SEGMENT.findall(path):
        annotation = _branch(annotation, value if value is not UNREAD else ({} if name else []))
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        try:
            if name:
                value, annotation = value if value is UNREAD else value[name], _field_type(annotation, name)
                parts.append(name)
            elif index:
                value, annotation = value if value is UNREAD else value[int(index)], args[0]
                parts.append(int(index))
            elif origin is dict or (isinstance(value, Mapping) and args):
                inner = args[-1]
                key = next(k for k, v in value.items() if not _converts(v, inner))
                value, annotation = value[key], inner
                parts.append(key)
        except (KeyError, IndexError, TypeError, StopIteration):
            break  # the located part is as far as it can be followed
    return parts, value, _branch(annotation, value if value is not UNREAD else {})


def _branch(annotation: Any, value: Any) -> Any:
    """The annotation without Annotated and Optional; of a union, the member meant for `value`'s JSON kind."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    members = [_branch(a, value) for a in typing.get_args(annotation) if a is not type(None)]
    return next((a for a in members if _holds(a, value)), members[0])


def _holds(annotation: Any, value: Any) -> bool:
    """Whether `annotation` is the kind of `value` (an object, a list, a string ...), whatever is inside."""
    base = typing.get_origin(annotation) or annotation
    if isinstance(value, Mapping):
        return base is dict or (isinstance(base, type) and issubclass(base, msgspec.Struct))
    return isinstance(base, type) and isinstance(value, base)


def _field_type(annotation: Any, name: str) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return next(f.type for f in msgspec.structs.fields(annotation) if f.encode_name == name)
    return typing.get_args(annotation)[-1] if typing.get_args(annotation) else Any


def _field_names(annotation: Any, value: Any) -> list[str]:
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return [f.encode_name for f in msgspec.structs.fields(annotation)]
    return []


def _example(annotation: Any) -> str | None:
    """A placeholder value of the annotation's JSON kind, for a hint: "...", 1, [...], {...}."""
    base = typing.get_origin(_branch(annotation, None)) or _branch(annotation, None)
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        return "{...}"
    return {str: '"..."', int: "1", float: "0.5", bool: "true", list: "[...]", dict: "{...}"}.get(base)


def _converts(value: Any, annotation: Any) -> bool:
    try:
        msgspec.convert(value, annotation, strict=True)
        return True
    except (msgspec.ValidationError, TypeError):
        return False


_JSON_KINDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
               "array": "a list", "object": "an object", "null": "null"}


def _expected(text: str) -> str:
    """msgspec's `str | array | null` -> "a string or a list" (null goes unsaid: leaving the field out is it)."""
    kinds = [_JSON_KINDS.get(k.strip(), k.strip()) for k in text.split("|") if k.strip() != "null"]
    return " or ".join(dict.fromkeys(kinds)) or "null"


def _invalid(param: str, what: str, value: Any, annotation: Any) -> tuple[str, str]:
    """(message, hint) for a value of the right kind that breaks a bound or is not one of the allowed values."""
    where = mistakes.where(param)
    if what.startswith("Invalid enum value") or typing.get_origin(annotation) is typing.Literal:
        allowed = ", ".join(repr(v) for v in typing.get_args(annotation))
        return f"{where} = {value!r} is not allowed", f"send one of {allowed}" if allowed else "see docs/api.md"
    if what.startswith("Number out of range"):
        return f"{where} is a number too large to represent", "send a number within the documented range"
    bound = re.search(r"([<>]=?) (-?[\d.e+]+)", what)
    if bound and "length" in what and hasattr(value, "__len__"):
        op, limit = bound.groups()
        return (f"{where} has {len(value):,} items or characters; it must have {op} {limit}",
                f"send {'at least' if '>' in op else 'at most'} {limit}")
    if bound:
        op, limit = bound.groups()
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)
        return f"{where} must be {op} {limit}, not {shown}", f"send a value {op} {limit}"
    return f"{where}: {what}", "see docs/api.md for the field's type and range"
