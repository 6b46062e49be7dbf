"""What `spinfc quantize` is doing, on stderr, from its first second: each step as it starts, and through a long
step how far it is and how long is left (a tqdm bar on a terminal; a plain line every few seconds otherwise, so a
log file or CI shows it too)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator


class Steps:
    def __init__(self, command: str = "spinfc quantize", stream=None, interval: float = 5.0):
        self.command, self.stream, self.interval = command, stream or sys.stderr, interval
        self.started = time.perf_counter()

    def say(self, text: str) -> None:
        print(f"{self.command} [{time.perf_counter() - self.started:.0f} s]: {text}", file=self.stream, flush=True)

    def over(self, items: Iterable, total: int, what: str) -> Iterator:
        """`items`, saying how many of `total` are done, the rate and the time left while they are used."""
        if self.stream.isatty():
            from tqdm import tqdm

            yield from tqdm(items, total=total, desc=f"{self.command}: {what}", unit="step", file=self.stream)
            return
        began = last = time.perf_counter()
        for done, item in enumerate(items, start=1):
            yield item
            now = time.perf_counter()
            if now - last >= self.interval or done == total:
                last = now
                left = (now - began) / done * (total - done)
                self.say(f"{what}: {done}/{total}, about {left:.0f} s left")


class Silent(Steps):
    """No output (library callers that did not ask for progress)."""

    def say(self, text: str) -> None:
        pass

    def over(self, items: Iterable, total: int, what: str) -> Iterator:
        yield from items
