"""One timer for every study: each variant run in alternating rounds (A, B, A, B, ...), so drift in the machine
shows as a spread rather than a bias, after one untimed warm-up run each; the best run is the figure, every run is
kept. A CUDA study passes `sync` (torch.cuda.synchronize) so the clock stops when the device is done."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import attrs


@attrs.frozen
class Timed:
    seconds: tuple[float, ...]  # every timed run, in order
    result: object = None  # the last run's return value

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """(slowest - fastest) / fastest."""
        return (max(self.seconds) - self.best) / self.best

    def rate(self, work: float) -> float:
        """`work` units per second at the best run (questions/s, rows/s)."""
        return work / self.best


def once(run: Callable[[], object], sync: Callable[[], None] | None = None) -> tuple[float, object]:
    if sync is not None:
        sync()
    began = time.perf_counter()
    result = run()
    if sync is not None:
        sync()
    return time.perf_counter() - began, result


def alternating(variants: dict[str, Callable[[], object]], rounds: int = 3, warm: bool = True,
                sync: Callable[[], None] | None = None) -> dict[str, Timed]:
    """Each of `variants` (name -> a run) timed `rounds` times, the variants taking turns within every round."""
    if warm:
        for run in variants.values():
            run()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    results: dict[str, object] = {}
    for _ in range(rounds):
        for name, run in variants.items():
            took, results[name] = once(run, sync)
            seconds[name].append(took)
    return {name: Timed(tuple(seconds[name]), results.get(name)) for name in variants}


def best_of(run: Callable[[], object], rounds: int = 3, warm: bool = True,
            sync: Callable[[], None] | None = None) -> Timed:
    """One variant: `alternating` with nothing to alternate with."""
    return alternating({"run": run}, rounds, warm, sync)["run"]


def device_ms(fn: Callable[[], object], device: str = "cuda", warmup: int = 3, reps: int = 10) -> float:
    """Milliseconds per call of `fn` run `reps` times back to back after `warmup` calls, the device synchronized
    around them (the time a kernel or a product takes when launches queue as they do in a pass)."""
    import torch

    def sync():
        if str(device).startswith("cuda"):
            torch.cuda.synchronize(device)
    for _ in range(warmup):
        fn()
    took, _ = once(lambda: [fn() for _ in range(reps)], sync)
    return took / reps * 1000
