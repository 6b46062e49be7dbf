"""Input files, read in batches of rows: Parquet (a file or a dataset folder), CSV and JSONL.

    source = open_input(path, text_column="text", id_column="id",     checks the columns; BulkError if one is missing
                        media_columns={"photo": "--image-column"})    media columns: their values read as they are
    source.total                                                       rows in the file when cheap to know, else None
    for rows in source.batches(256): ...                               lists of `Row`, in file order

Only the id, text and media columns are read, a batch at a time: memory holds one batch, never the file. A row that
cannot be scored (a malformed JSON line, a missing or non-text value, empty text) comes as a `Row` with its
`problem` set, in its place, and the job goes on.
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections.abc import Iterator
from pathlib import Path

import attrs
import pyarrow as pa

from spinfc.bulk.errors import BulkError, RowError
from spinfc.errors import ContentTooLong

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
CSV_SUFFIXES = (".csv", ".tsv")
# A row's text longer than this is an error row before it costs anything: no pass holds a content of a million
# characters (a token covers a few), and tokenizing one takes seconds.
MAX_TEXT_CHARS = 1 << 20
# What the CSV reader takes at once: a row (a field) longer than this cannot be read, and stops the job there.
CSV_BLOCK_BYTES = 1 << 26


@attrs.frozen
class Row:
    index: int  # 0-based position among the file's records (a malformed JSON line counts as one)
    id: str | None  # the id column's value as text
    text: object
    problem: RowError | None = None
    media: tuple = ()  # the media columns' values (a path or URL, a list of them, or None), in their order
    sources: tuple = ()  # those media, read (spinfc.media.MediaSource, by spinfc/bulk/media.py)


def input_format(path: str) -> str:
    name = path.lower().rstrip("/")
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    return "parquet"


def open_input(path: str, text_column: str = "text", id_column: str = "id",
               media_columns: dict[str, str] | None = None):
    """`media_columns`: column name -> its flag (--image-column ...), read beside the text (spinfc/bulk/media.py)."""
    if not Path(path).exists():
        raise BulkError(f"input {path}: no such file or folder")
    kind = input_format(path)
    reader = {"jsonl": JsonlInput, "csv": CsvInput, "parquet": ParquetInput}[kind]
    return reader(path, text_column, id_column, dict(media_columns or {}))


def has_media(media: tuple) -> bool:
    return any(value not in (None, "", []) for value in media)


def check_row(index: int, row_id, text, media: tuple = ()) -> Row:
    """A row with its problem, if any: no id, text that is not a string, or text that is empty (a row with media
    may have no text: its content is the media)."""
    row_id = None if row_id is None else str(row_id)
    if row_id is None or row_id == "":
        return Row(index, None, text, RowError("missing_id", "the row has no id"), media)
    if has_media(media) and (text is None or (isinstance(text, str) and not text.strip())):
        return Row(index, row_id, "", None, media)
    if not isinstance(text, str):
        kind = "nothing (null)" if text is None else f"a {type(text).__name__}"
        return Row(index, row_id, text, RowError("not_text", f"the text column holds {kind}, not text"), media)
    if len(text) > MAX_TEXT_CHARS:
        return Row(index, row_id, None, RowError(ContentTooLong.CODE, f"the text has {len(text):,} characters, more "
                                                 f"than any content a pass holds (at most {MAX_TEXT_CHARS:,} are "
                                                 "read): shorten it or split it into several rows"), media)
    if not text.strip():
        return Row(index, row_id, text, RowError("empty_content", "the text is empty"), media)
    return Row(index, row_id, text, None, media)


def _checked(path: str, found: list[str], text_column: str, id_column: str, media: dict[str, str]) -> None:
    for column, flag in ((text_column, "--text-column"), (id_column, "--id-column"), *media.items()):
        if column not in found:
            raise _missing(path, column, flag, found)


def _missing(path: str, column: str, flag: str, found: list[str]) -> BulkError:
    return BulkError(f"input {path} has no column {column!r} ({flag}); the columns are "
                     f"{', '.join(map(repr, found)) or 'none'}: name one with {flag} NAME")


class ParquetInput:
    def __init__(self, path: str, text_column: str, id_column: str, media: dict[str, str]):
        import pyarrow.dataset as ds

        self.path, self.columns = path, [id_column, text_column, *media]
        with _unreadable(path):
            self.dataset = ds.dataset(path, format="parquet")
            _checked(path, self.dataset.schema.names, text_column, id_column, media)
            self.total = self.dataset.count_rows()

    def batches(self, size: int) -> Iterator[list[Row]]:
        index = 0
        with _unreadable(self.path):
            for batch in self.dataset.to_batches(columns=self.columns, batch_size=size):
                ids, texts, *media = (batch.column(k).to_pylist() for k in range(len(self.columns)))
                yield [check_row(index + k, ids[k], texts[k], tuple(m[k] for m in media)) for k in range(len(ids))]
                index += len(ids)


class CsvInput:
    def __init__(self, path: str, text_column: str, id_column: str, media: dict[str, str]):
        import pyarrow.csv as csv

        self.path, self.columns, self.total = path, [id_column, text_column, *media], None
        self.invalid: list[tuple[int | None, str]] = []
        delimiter = "\t" if path.lower().endswith(".tsv") else ","
        self.parse = csv.ParseOptions(delimiter=delimiter, newlines_in_values=True,
                                      invalid_row_handler=self._invalid)
        skip = csv.ParseOptions(delimiter=delimiter, newlines_in_values=True, invalid_row_handler=lambda row: "skip")
        try:
            found = csv.open_csv(path, parse_options=skip).schema.names
        except pa.ArrowInvalid as error:
            raise BulkError(f"input {path}: not a CSV file with a header line: {error}") from None
        _checked(path, found, text_column, id_column, media)

    def _invalid(self, row) -> str:
        self.invalid.append((row.number, f"{row.actual_columns} fields where the header has {row.expected_columns}"))
        return "skip"

    def batches(self, size: int) -> Iterator[list[Row]]:
        """Rows in file order: a malformed line in its place among the others (pyarrow reports it apart from the
        rows it parses, so where it stood is read once from the file, with Python's `csv`, on the first one)."""
        import pyarrow.csv as csv

        convert = csv.ConvertOptions(include_columns=self.columns, strings_can_be_null=False,
                                     column_types={c: pa.string() for c in self.columns})
        reader = csv.open_csv(self.path, parse_options=self.parse, convert_options=convert,
                              read_options=csv.ReadOptions(block_size=CSV_BLOCK_BYTES, use_threads=False))
        index, pending, malformed, placed = 0, [], None, 0
        for batch in _read(reader, self.path):
            if self.invalid and malformed is None:
                malformed = _malformed_records(self.path, self.parse.delimiter)
            ids, texts, *media = (batch.column(name).to_pylist() for name in self.columns)
            for k in range(len(ids)):
                while malformed and index in malformed:
                    pending.append(Row(index, None, None, RowError("malformed_line", malformed.pop(index))))
                    index, placed = index + 1, placed + 1
                pending.append(check_row(index, ids[k], texts[k], tuple(m[k] for m in media)))
                index += 1
            while len(pending) >= size:
                yield pending[:size]
                pending = pending[size:]
        if self.invalid and malformed is None:
            malformed = _malformed_records(self.path, self.parse.delimiter)
        whys = [malformed[k] for k in sorted(malformed or {})]
        # a line pyarrow refused that Python's `csv` read as a whole row is still an error row, after the others
        whys += [f"line {n}: {why}" for n, why in self.invalid[placed + len(whys):]]
        pending += [Row(index + k, None, None, RowError("malformed_line", why)) for k, why in enumerate(whys)]
        self.invalid.clear()
        if pending:
            yield pending


def _malformed_records(path: str, delimiter: str) -> dict[int, str]:
    """Record index (0-based, after the header, blank lines not counted) -> why, for every record of `path` whose
    field count differs from the header's, as pyarrow's reader counts them.

    Python's `csv` refuses a field over its limit (131,072 characters by default) where pyarrow reads up to
    CSV_BLOCK_BYTES: the limit is raised to that (never lowered; it is the module's one setting) so that every row
    pyarrow read is counted here too."""
    csv.field_size_limit(max(csv.field_size_limit(), CSV_BLOCK_BYTES))
    found, index = {}, 0
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as file:
        reader = csv.reader(file, delimiter=delimiter)
        width = len(next(reader, []))
        line = reader.line_num + 1
        try:
            for fields in reader:
                if fields:
                    if len(fields) != width:
                        found[index] = f"line {line}: {len(fields)} fields where the header has {width}"
                    index += 1
                line = reader.line_num + 1
        except csv.Error:
            pass  # a field over CSV_BLOCK_BYTES: pyarrow's reader stops the job there too, with its line (`_read`)
    return found


def _read(reader, path: str) -> Iterator:
    """The CSV reader's batches; one it cannot read (a field over CSV_BLOCK_BYTES) stops the job with its line."""
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, OSError) as error:
            raise BulkError(f"input {path}: cannot be read past here ({error}); the rows before it were scored: "
                            f"split a field over {CSV_BLOCK_BYTES >> 20} MiB out of the file") from None
        yield batch


@contextlib.contextmanager
def _unreadable(path: str) -> Iterator[None]:
    """A Parquet file pyarrow cannot read (truncated, zeroed, not Parquet) as one located line."""
    try:
        yield
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
        raise BulkError(f"input {path}: not a readable Parquet file ({str(error).splitlines()[0]}): write it again, "
                        "or convert it to CSV or JSONL") from None


class JsonlInput:
    def __init__(self, path: str, text_column: str, id_column: str, media: dict[str, str]):
        self.path, self.text_column, self.id_column, self.media = path, text_column, id_column, tuple(media)
        first, lines = None, 0
        with open(path, "rb") as file:
            for line in file:
                if not line.strip():
                    continue
                lines += 1
                if first is None:
                    try:
                        value = json.loads(line)
                        first = value if isinstance(value, dict) else None
                    except ValueError:
                        pass
        self.total = lines
        found = list(first) if first is not None else []
        _checked(path + " (its first JSON object)", found, text_column, id_column, media)

    def batches(self, size: int) -> Iterator[list[Row]]:
        rows, index = [], 0
        with open(self.path, "rb") as file:
            for number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                rows.append(self._row(index, number, line))
                index += 1
                if len(rows) == size:
                    yield rows
                    rows = []
        if rows:
            yield rows

    def _row(self, index: int, number: int, line: bytes) -> Row:
        path = self.path
        try:
            value = json.loads(line)
        except ValueError as error:
            return Row(index, None, None, RowError("malformed_line", f"{path}:{number}: not valid JSON: {error}"))
        if not isinstance(value, dict):
            return Row(index, None, None, RowError("malformed_line", f"{path}:{number}: not a JSON object"))
        for column in (self.id_column, self.text_column):
            if column not in value:
                row_id = value.get(self.id_column)
                return Row(index, None if row_id is None else str(row_id), None,
                           RowError("missing_field", f"{path}:{number}: the object has no {column!r}"))
        return check_row(index, value[self.id_column], value[self.text_column],
                         tuple(value.get(column) for column in self.media))
