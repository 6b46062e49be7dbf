"""`spinfc score` writes a group when about `--group-seconds` of work is scored (default 5 s), not after a fixed
count of rows, so a run killed early has written all but its last few seconds; `--group-size N` still gives groups
of N rows. The loop (runner.run) on a stand-in engine that takes a known time per batch."""

from __future__ import annotations

import asyncio
import time
import types

import attrs

from spinfc.bulk import runner
from spinfc.bulk.options import configure_parser
from spinfc.bulk.progress import Progress
from spinfc.bulk.readers import Row
from spinfc.bulk.writers import Done


class Source:
    total = 200

    def batches(self, size: int):
        rows = [Row(i, f"r{i}", f"text {i}") for i in range(self.total)]
        for start in range(0, len(rows), size):
            yield rows[start:start + size]


@attrs.define
class SlowEngine:
    seconds: float  # per batch

    async def score(self, texts):
        await asyncio.sleep(self.seconds)
        return [types.SimpleNamespace(own=[], packs=[], error=None) for _ in texts]  # a scored row, no error


class Layout:
    questions = 1

    def scored_row(self, row, row_id, own, packs):
        return {"row": row, "id": row_id, "error_code": None}


@attrs.define
class Output:
    done: Done = attrs.Factory(Done)
    groups: list = attrs.Factory(list)  # (rows, seconds since the start) of each write

    def write(self, rows):
        if rows:
            self.groups.append((len(rows), time.perf_counter()))


class Errors:
    def write(self, rows):
        pass


def run(group_size, group_seconds, per_batch=0.05) -> tuple[list[int], float]:
    output, started = Output(), time.perf_counter()
    asyncio.run(runner.run(Source(), SlowEngine(per_batch), Layout(), output, Errors(), Progress(200, quiet=True),
                           batch_size=10, group_size=group_size, in_flight=1, group_seconds=group_seconds))
    return [n for n, _ in output.groups], output.groups[0][1] - started


def test_groups_are_sized_by_time_by_default() -> None:
    parser = __import__("argparse").ArgumentParser()
    configure_parser(parser)
    defaults = parser.parse_args(["in.parquet", "-o", "out.parquet"])
    assert defaults.group_size is None and defaults.group_seconds == 5.0
    sizes, first = run(None, 0.2)  # 20 batches of 10 rows, 0.05 s each: a group every ~4 batches
    assert sum(sizes) == 200 and len(sizes) >= 4, sizes
    assert first < 1.0  # the first rows are on disk within a fraction of the run, not at its end


def test_group_size_gives_groups_of_that_many_rows() -> None:
    sizes, _ = run(50, 5.0, per_batch=0.0)
    assert sizes == [50, 50, 50, 50]
