"""The bulk job's loop: read a batch, drop the rows already done, send the rest through the transport (several
batches in flight, so the engine packs their contents into the same passes), and write the rows in input order,
a group at a time.

    read  ->  skip done / duplicate ids  ->  score (batches in flight)  ->  rows in order  ->  write a group

A batch the engine refuses (a content over a limit) is split in halves and each scored again, down to single rows,
so only the rows at fault become error rows; a row with no usable text, or media that cannot be read (a path
outside --media-root, a URL not allowed), never reaches the engine. Every input row
gives exactly one output row.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import attrs

from spinfc.bulk.columns import Layout
from spinfc.bulk.errors import Rejected, RowError
from spinfc.bulk.progress import Progress, Summary
from spinfc.bulk.readers import Row
from spinfc.bulk.transport import RowContent, Transport
from spinfc.bulk.writers import Done, ErrorLog


async def score_rows(transport: Transport, layout: Layout, rows: list[Row]) -> list[dict]:
    """The output rows of `rows`, in order: problem rows as error rows, the others scored (one request)."""
    good = [row for row in rows if row.problem is None]
    scored: dict[int, dict] = {}
    if good:
        try:
            results = await transport.score([RowContent(row.text, row.sources) if row.sources else row.text
                                             for row in good])
            for row, result in zip(good, results):  # a row the server refused alone is its error row
                scored[row.index] = layout.error_row(row.index, row.id, *result.error) if result.error else \
                    layout.scored_row(row.index, row.id, result.own, result.packs)
        except Rejected as error:
            if len(good) == 1:
                row = good[0]
                scored[row.index] = layout.error_row(row.index, row.id, error.code, error.message)
            else:  # find the rows at fault: score each half (two requests at a time), down to single rows
                half = len(good) // 2
                parts = await asyncio.gather(score_rows(transport, layout, good[:half]),
                                             score_rows(transport, layout, good[half:]))
                scored.update((row.index, out) for row, out in zip(good, parts[0] + parts[1]))
    return [scored[row.index] if row.problem is None else
            layout.error_row(row.index, row.id, row.problem.code, row.problem.message) for row in rows]


async def run(source, transport: Transport, layout: Layout, output, errors: ErrorLog, progress: Progress, *,
              batch_size: int, group_size: int | None, in_flight: int, group_seconds: float = 5.0,
              media=None) -> Summary:
    """Score every row of `source` and write them in input order, a group at a time: `group_size` rows, or (None)
    what was scored in about `group_seconds`, so a killed run has written all but its last few seconds of work.
    `media` (bulk/media.py `MediaColumns`) reads each batch's media, in a thread, before it is scored."""
    summary, started = Summary(), time.perf_counter()
    flushed = started
    done: Done = output.done
    seen: set[str] = set()
    pending: deque[asyncio.Task] = deque()
    group: list[dict] = []

    def flush() -> None:
        nonlocal flushed
        output.write(group)  # the output first: an error line is never written for a row the output lacks
        errors.write(group)
        group.clear()
        flushed = time.perf_counter()

    async def collect(task: asyncio.Task) -> None:
        rows = await task
        group.extend(rows)
        failed = sum(row["error_code"] is not None for row in rows)
        summary.rows += len(rows)
        summary.errors += failed
        summary.questions += (len(rows) - failed) * layout.questions
        progress.advance(len(rows), (len(rows) - failed) * layout.questions)
        if len(group) >= group_size if group_size is not None else time.perf_counter() - flushed >= group_seconds:
            flush()

    try:
        for batch in source.batches(batch_size):
            todo = []
            for row in batch:
                if (row.id, row.index) in done:
                    summary.skipped += 1
                    continue
                if row.id is not None:
                    if row.id in seen and row.problem is None:
                        row = attrs.evolve(row, problem=_duplicate(row.id))
                    seen.add(row.id)
                todo.append(row)
            if todo and media is not None:
                todo = await asyncio.to_thread(media.resolve, todo)
            if todo:
                pending.append(asyncio.create_task(score_rows(transport, layout, todo)))
            while len(pending) >= in_flight:
                await collect(pending.popleft())
        while pending:
            await collect(pending.popleft())
        flush()
    finally:
        for task in pending:
            task.cancel()
        summary.seconds = time.perf_counter() - started
    return summary


def _duplicate(row_id: str):
    return RowError("duplicate_id", f"id {row_id!r} was already used by an earlier row: ids must be unique (the "
                    "output and --resume key on them)")
