"""The output, written a group of rows at a time so that a kill loses at most the group being filled.

    Parquet (OUTPUT not ending in .jsonl/.ndjson/.json): OUTPUT is a dataset folder of part files
        part-00000.parquet, part-00001.parquet, ...   each written as .part-NNNNN.parquet.tmp, then renamed: a part
        is there whole or not at all. pyarrow, pandas, polars, DuckDB and Ray read the folder as one table. Every
        part's schema metadata holds spinfc.system_fingerprint, spinfc.model, spinfc.version and spinfc.columns.
    JSONL: one JSON object per line, the same keys as the Parquet columns; each group is appended and fsync'ed.
        The metadata is a sidecar, OUTPUT.meta.json. A line cut short by a kill is dropped on --resume.

`open_output(..., resume=True)` reads what OUTPUT holds (the ids and rows already written) so those are skipped;
an OUTPUT written under another fingerprint or with other columns is refused rather than mixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spinfc import __version__
from spinfc.bulk.errors import BulkError

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


class Done:
    """What OUTPUT already holds: ids, and the row numbers of rows that had no id (malformed lines)."""

    def __init__(self):
        self.ids: set[str] = set()
        self.rows: set[int] = set()

    def add(self, row_id: str | None, row: int | None) -> None:
        if row_id is not None:
            self.ids.add(row_id)
        elif row is not None:
            self.rows.add(row)

    def __contains__(self, item: tuple[str | None, int]) -> bool:
        row_id, row = item
        return row_id in self.ids if row_id is not None else row in self.rows

    def __len__(self) -> int:
        return len(self.ids) + len(self.rows)


def check_output(path: str, resume: bool) -> None:
    """Before any work (the model loads after it): the OUTPUT's folder is a folder we can write in, an OUTPUT that
    already holds rows needs --resume, a Parquet OUTPUT must not be a file."""
    found = Path(path)
    parent = next((p for p in found.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise BulkError(f"{path}: its folder {parent} is a file, not a folder: give an OUTPUT in a folder")
    if parent is not None and not os.access(parent, os.W_OK):
        raise BulkError(f"{path}: the folder {parent} cannot be written to: give an OUTPUT where you can write")
    if resume or not found.exists():
        return
    jsonl = path.lower().endswith(JSONL_SUFFIXES)
    if not jsonl and not found.is_dir():
        raise BulkError(f"{path} is a file; a Parquet OUTPUT is a folder of part files: give a new name, or end "
                        "it in .jsonl for one JSONL file")
    if (found.stat().st_size > 0) if jsonl else any(found.glob("part-*.parquet")):
        raise BulkError(f"{path} already holds rows: add --resume to continue that job, or remove it to start again")


def open_output(path: str, schema: pa.Schema, resume: bool):
    writer = JsonlOutput if path.lower().endswith(JSONL_SUFFIXES) else ParquetOutput
    return writer(Path(path), schema, resume)


def _check_same(path: Path, found: dict[bytes, bytes] | dict[str, str], schema: pa.Schema) -> None:
    found = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
             for k, v in (found or {}).items()}
    want = {k.decode(): v.decode() for k, v in schema.metadata.items()}
    for key, what in (("spinfc.system_fingerprint", "fingerprint"), ("spinfc.columns", "questions")):
        if found.get(key) != want[key]:
            shown = found.get(key, "none") if key != "spinfc.columns" else "other columns"
            raise BulkError(f"{path} holds rows scored with another {what} ({shown[:80]}) than this run "
                            f"({want[key][:80] if key != 'spinfc.columns' else 'these columns'}): scores are "
                            "comparable only under one fingerprint and one question set; write to a new OUTPUT")


class ParquetOutput:
    def __init__(self, path: Path, schema: pa.Schema, resume: bool):
        self.path, self.schema, self.done = path, schema, Done()
        if path.exists() and not path.is_dir():
            raise BulkError(f"{path} is a file; a Parquet OUTPUT is a folder of part files: give a new name, or end "
                            "it in .jsonl for one JSONL file")
        parts = sorted(path.glob("part-*.parquet")) if path.is_dir() else []
        if parts and not resume:
            raise BulkError(f"{path} already holds {len(parts)} part file(s): add --resume to continue that job, or "
                            "remove the folder to start again")
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob(".part-*.tmp"):  # a group that a kill interrupted; its rows are scored again
            stale.unlink()
        for part in parts:
            _check_same(part, pq.read_schema(part).metadata, schema)
            table = pq.read_table(part, columns=["id", "row"])
            for row_id, row in zip(table.column("id").to_pylist(), table.column("row").to_pylist()):
                self.done.add(row_id, row)
        self.next = 1 + max((int(p.stem.split("-")[1]) for p in parts), default=-1)

    def write(self, rows: list[dict]) -> None:
        if not rows:
            return
        name = f"part-{self.next:05d}.parquet"
        temporary = self.path / f".{name}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=self.schema), temporary)
        with open(temporary, "rb") as file:
            os.fsync(file.fileno())
        os.replace(temporary, self.path / name)
        self.next += 1

    def close(self) -> None:
        pass


class JsonlOutput:
    def __init__(self, path: Path, schema: pa.Schema, resume: bool):
        self.path, self.schema, self.done = path, schema, Done()
        self.meta = path.with_name(path.name + ".meta.json")
        metadata = {k.decode(): v.decode() for k, v in schema.metadata.items()}
        if path.exists() and path.stat().st_size > 0:
            if not resume:
                raise BulkError(f"{path} already holds rows: add --resume to continue that job, or remove it (and "
                                f"{self.meta.name}) to start again")
            _check_same(path, json.loads(self.meta.read_text()) if self.meta.exists() else {}, schema)
            self._read_done()
        else:
            self._write_meta(metadata)
        self.file = open(path, "a", encoding="utf-8")

    def _write_meta(self, metadata: dict) -> None:
        temporary = self.meta.with_name(self.meta.name + ".tmp")
        temporary.write_text(json.dumps(metadata, indent=1) + "\n")
        os.replace(temporary, self.meta)

    def _read_done(self) -> None:
        """Read the ids written; cut off a last line that a kill left unfinished."""
        keep = 0
        with open(self.path, "rb") as file:
            for line in file:
                try:
                    value = json.loads(line) if line.endswith(b"\n") else None
                except ValueError:
                    value = None
                if value is None:
                    break
                self.done.add(value.get("id"), value.get("row"))
                keep += len(line)
        with open(self.path, "r+b") as file:
            file.truncate(keep)

    def write(self, rows: list[dict]) -> None:
        self.file.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


class ErrorLog:
    """--errors FILE: one JSON line per row that was not scored, {"row", "id", "code", "reason"}; appended."""

    def __init__(self, path: str | None):
        self.file = open(path, "a", encoding="utf-8") if path else None

    def write(self, rows: list[dict]) -> None:
        if self.file is None:
            return
        for row in rows:
            if row["error_code"] is not None:
                self.file.write(json.dumps({"row": row["row"], "id": row["id"], "code": row["error_code"],
                                            "reason": row["error"]}, ensure_ascii=False) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def metadata(transport) -> dict[str, str]:
    return {"spinfc.system_fingerprint": transport.fingerprint, "spinfc.model": transport.model,
            "spinfc.version": __version__}
