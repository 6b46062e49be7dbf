"""Progress on stderr: a tqdm bar on a terminal (rows, rows/s, questions/s, ETA), a plain line every
`interval` seconds otherwise (a log file, CI), nothing with --quiet; and the summary at the end."""

from __future__ import annotations

import sys
import time

import attrs


@attrs.define
class Summary:
    rows: int = 0  # rows written this run, error rows included
    errors: int = 0
    skipped: int = 0  # rows already in OUTPUT (--resume)
    questions: int = 0  # (content, question) pairs answered
    seconds: float = 0.0

    def line(self) -> str:
        seconds = max(self.seconds, 1e-9)
        return (f"spinfc score: {self.rows:,} rows ({self.errors:,} errors, {self.skipped:,} already done) in "
                f"{self.seconds:.1f} s: {self.rows / seconds:.2f} rows/s, {self.questions / seconds:.1f} questions/s")


class Progress:
    def __init__(self, total: int | None, *, quiet: bool = False, interval: float = 10.0, stream=None):
        self.stream = stream or sys.stderr
        self.total, self.quiet, self.interval = total, quiet, interval
        self.started = self.last = time.perf_counter()
        self.rows = self.questions = 0
        self.bar = None
        if not quiet and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="rows", file=self.stream, dynamic_ncols=True, smoothing=0.1)

    def advance(self, rows: int, questions: int) -> None:
        self.rows += rows
        self.questions += questions
        now = time.perf_counter()
        if self.bar is not None:
            self.bar.update(rows)
            self.bar.set_postfix_str(f"{self.questions / max(now - self.started, 1e-9):.1f} questions/s", refresh=False)
        elif not self.quiet and now - self.last >= self.interval:
            self.last = now
            print(self._line(now), file=self.stream, flush=True)

    def _line(self, now: float) -> str:
        seconds = max(now - self.started, 1e-9)
        rate = self.rows / seconds
        done = f"{self.rows:,}" + (f"/{self.total:,}" if self.total is not None else "")
        eta = ""
        if self.total is not None and rate > 0:
            eta = f", ETA {max(0.0, (self.total - self.rows) / rate):.0f} s"
        return f"spinfc score: {done} rows, {rate:.2f} rows/s, {self.questions / seconds:.1f} questions/s{eta}"

    def close(self, summary: Summary) -> None:
        if self.bar is not None:
            self.bar.close()
        if not self.quiet:
            print(summary.line(), file=self.stream, flush=True)
