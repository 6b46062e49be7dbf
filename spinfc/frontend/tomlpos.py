"""Where each key and value of a TOML file is, for error messages (tomllib gives values, not positions).

`TomlPositions(text, file)` scans a file that `tomllib` has already accepted and records, for every key path
(`("questions", 3, "template")`, array items by index, `[[tables]]` by their running index), the file offset of
its key and of its value. For string values it also records the file offset of every decoded character, so an
error inside a template points at the exact line and column even through escapes (`\\n`, `\\"`) and
multi-line strings.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import attrs

from spinfc.ir.nodes import SourceLoc

Path = tuple  # of str keys and int indices

_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@attrs.frozen
class Spot:
    key: int  # file offset of the key (of the item, for array items; of the header, for tables)
    value: int  # file offset of the value's first character
    chars: tuple[int, ...] | None = None  # strings: file offset of each decoded character, then of the end
    decoded: str | None = None


class TomlPositions:
    """Key paths of one TOML text mapped to file positions; `loc` falls back to the nearest known ancestor."""

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.spots: dict[Path, Spot] = {}
        _Scanner(text, self.spots).run()

    def at_offset(self, offset: int) -> SourceLoc:
        line = bisect.bisect_right(self._line_starts, offset)
        return SourceLoc(self.file, line, offset - self._line_starts[line - 1] + 1)

    def loc(self, path: Path, *, key: bool = False) -> SourceLoc:
        """The value at `path` (its key with key=True); an unknown path gives its nearest known ancestor."""
        while path and path not in self.spots:
            path = path[:-1]
        spot = self.spots.get(path)
        if spot is None:
            return SourceLoc(self.file, 1, 1)
        return self.at_offset(spot.key if key else spot.value)

    def string_locator(self, path: Path, value: str) -> Callable[[int], SourceLoc] | None:
        """For the string `value` stored at `path`: decoded character index -> its place in the file."""
        spot = self.spots.get(path)
        if spot is None or spot.chars is None or spot.decoded != value:
            return None
        chars = spot.chars
        return lambda index: self.at_offset(chars[min(max(index, 0), len(chars) - 1)])


class _Scanner:
    """A position-only walk over valid TOML: tables, arrays of tables, dotted keys, inline tables, arrays."""

    def __init__(self, text: str, spots: dict[Path, Spot]) -> None:
        self.t, self.i, self.spots = text, 0, spots
        self.latest: dict[Path, int] = {}  # array-of-tables path -> index of its last [[header]]
        self.table: Path = ()

    def run(self) -> None:
        while self._skip(newlines=True) < len(self.t):
            start = self.i
            if self.t.startswith("[[", self.i):
                self.i += 2
                keys = self._keys()
                self.i += 2
                base = self._resolve(keys[:-1]) + (keys[-1],)
                self.latest[base] = self.latest.get(base, -1) + 1
                self.table = base + (self.latest[base],)
                self.spots.setdefault(base, Spot(start, start))
                self.spots[self.table] = Spot(start, start)
            elif self.t[self.i] == "[":
                self.i += 1
                keys = self._keys()
                self.i += 1
                self.table = self._resolve(keys)
                self.spots[self.table] = Spot(start, start)
            else:
                self._pair(self.table, start)

    def _resolve(self, keys: Path) -> Path:
        out: Path = ()
        for k in keys:
            out += (k,)
            if out in self.latest:
                out += (self.latest[out],)
        return out

    def _skip(self, newlines: bool = False) -> int:
        t = self.t
        while self.i < len(t):
            c = t[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(t) and t[self.i] != "\n":
                    self.i += 1
            else:
                break
        return self.i

    def _keys(self) -> Path:
        keys: list[str] = []
        while True:
            self._skip()
            c = self.t[self.i]
            if c in "\"'":
                keys.append(self._string()[0])
            else:
                start = self.i
                while self.i < len(self.t) and self.t[self.i] in _BARE:
                    self.i += 1
                keys.append(self.t[start : self.i])
            self._skip()
            if self.i < len(self.t) and self.t[self.i] == ".":
                self.i += 1
                continue
            return tuple(keys)

    def _pair(self, table: Path, start: int) -> None:
        keys = self._keys()
        self._skip()
        self.i += 1  # "="
        self._skip()
        self._value(table + keys, start)

    def _value(self, path: Path, key: int) -> None:
        t, start = self.t, self.i
        c = t[start]
        if c in "\"'":
            decoded, chars = self._string()
            self.spots[path] = Spot(key, start, chars, decoded)
        elif c == "[":
            self.spots[path] = Spot(key, start)
            self.i += 1
            index = 0
            while self._skip(newlines=True) < len(t) and t[self.i] != "]":
                self._value(path + (index,), self.i)
                index += 1
                if self._skip(newlines=True) < len(t) and t[self.i] == ",":
                    self.i += 1
            self.i += 1
        elif c == "{":
            self.spots[path] = Spot(key, start)
            self.i += 1
            while self._skip() < len(t) and t[self.i] != "}":
                self._pair(path, self.i)
                if self._skip() < len(t) and t[self.i] == ",":
                    self.i += 1
            self.i += 1
        else:
            while self.i < len(t) and t[self.i] not in ",]}\r\n#":
                self.i += 1
            self.spots[path] = Spot(key, start)

    def _string(self) -> tuple[str, tuple[int, ...]]:
        """Decode the string at the cursor; return it with the file offset of each character (and the end)."""
        t = self.t
        quote = t[self.i]
        multi = t.startswith(quote * 3, self.i)
        self.i += 3 if multi else 1
        if multi and t.startswith("\r\n", self.i):
            self.i += 2
        elif multi and t.startswith("\n", self.i):
            self.i += 1
        out: list[str] = []
        offsets: list[int] = []
        while True:
            c = t[self.i]
            if c == quote and (not multi or t.startswith(quote * 3, self.i)):
                if multi:  # up to two quotes just before the closing three belong to the string
                    run = 3
                    while self.i + run < len(t) and t[self.i + run] == quote and run < 5:
                        run += 1
                    for _ in range(run - 3):
                        out.append(quote)
                        offsets.append(self.i)
                        self.i += 1
                    self.i += 3
                else:
                    self.i += 1
                offsets.append(self.i - 1)
                return "".join(out), tuple(offsets)
            if c == "\\" and quote == '"':
                self._escape(out, offsets, multi)
            elif c == "\r" and t.startswith("\r\n", self.i):
                out.append("\n")
                offsets.append(self.i)
                self.i += 2
            else:
                out.append(c)
                offsets.append(self.i)
                self.i += 1

    def _escape(self, out: list[str], offsets: list[int], multi: bool) -> None:
        t, at = self.t, self.i
        e = t[at + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            self.i += 2
        elif e in "uU":
            width = 4 if e == "u" else 8
            out.append(chr(int(t[at + 2 : at + 2 + width], 16)))
            self.i += 2 + width
        elif multi:  # a line-ending backslash: drop it and all whitespace up to the next text
            self.i += 1
            while self.i < len(t) and t[self.i] in " \t\r\n":
                self.i += 1
            return
        else:
            out.append(e)
            self.i += 2
        offsets.append(at)
