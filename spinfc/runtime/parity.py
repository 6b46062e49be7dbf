"""`spinfc parity`: run a recorded job on the engine and compare its scores with a reference, or record one.

A fixture (fixtures/parity/*.json) is a model and a list of jobs, each a /v1/score request body (`request`) or a
pack asked about contents (`pack`, `contents`):

    {"model": "smollm2-135m", "token_budget": 1024,
     "jobs": [{"id": "news", "request": {...}}, {"id": "triage", "pack": "../../packs/x.toml", "contents": [...]}]}

(a pack's path is relative to the fixture's folder).

Jobs run one after another, each through the engine's public path (compile, score, results), so each job's
passes hold the same segments in the same order on every run: a run is deterministic. What is promised:

    same fingerprint on CUDA                  bit-identical (the same GPU architecture: it is in the fingerprint)
    same fingerprint on the CPU               every field within CROSS_CPU_TOLERANCE, on any CPU family (its
                                              matmul kernels round differently on AMD and Intel, AVX2 and AVX-512,
                                              and by row and thread count on one machine: two AMD EPYC hosts
                                              differed by 1.6e-5); a run that is the same bits says so
    another fingerprint                       every field within --tolerance (the largest difference is reported)
"""

from __future__ import annotations

import asyncio
import json
import platform
from pathlib import Path

import attrs
import msgspec

from spinfc.compiler import load_source
from spinfc.config import EngineSettings
from spinfc.registry import DEFAULT_MODEL
from spinfc.runtime.admit.scoring import score_compiled
from spinfc.runtime.start import start_engine

FORMAT = "spinfc-parity-1"
FIELDS = ("logprob", "p", "floor_p", "residual")
# float32 on two CPU families: the shipped references, recorded on an AMD EPYC (AVX-512), were 2.2e-5 away at most on
# an Intel CI host; 1e-4 leaves room for other kernels, while a real change of the model or the engine moves scores by
# far more (a quantized scheme: ~1)
CROSS_CPU_TOLERANCE = 1e-4


def machine(device: str) -> str:
    """What decides a CPU's rounding beyond the fingerprint: the vendor and the vector unit torch dispatches to
    (`AuthenticAMD-AVX512`); on CUDA the GPU architecture is already in the fingerprint ("cuda")."""
    if str(device).startswith("cuda"):
        return "cuda"
    import torch

    vendor = "unknown"
    try:
        with open("/proc/cpuinfo") as info:
            vendor = next((line.split(":", 1)[1].strip() for line in info if line.startswith("vendor_id")), vendor)
    except OSError:
        vendor = platform.processor() or platform.machine() or vendor
    return f"{vendor}-{torch.backends.cpu.get_cpu_capability()}"


class ParityError(ValueError):
    """A fixture or reference that cannot be used; the message says where and what to do."""


async def _score(engine, job: dict, model_name: str, where: str, base: Path):
    """The one adapter onto the engine: compile a job (request body or pack + contents) with no request limits (a
    fixture is the operator's own), score it through the scoring entry's form for compiled work, results."""
    if "request" in job:
        compiled = await engine.compile_async(job["request"])
    elif "pack" in job:
        program = load_source(base / job["pack"], model_name, contents=job.get("contents", []))
        compiled = await engine.compile_program_async(program)
    else:
        raise ParityError(f"{where}: a job needs `request` (a /v1/score body) or `pack` (a .toml path)")
    (scored,) = await score_compiled(engine, [compiled])
    return scored.results()


def run_fixture(fixture: dict, *, model: str | None = None, device: str = "cpu", dtype: str | None = None,
                base: Path = Path("."), loaded=None) -> dict:
    """Run every job of `fixture` in order (a pack's path is relative to `base`, the fixture's folder); returns
    {format, fingerprint, model, results: one row per option of every query of every input}. `loaded`: a model
    stack already built (on `device`) to run instead of loading `model`."""
    jobs = fixture.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ParityError("the fixture has no `jobs` list: give one job per request body or pack")
    # the engine a server runs, at the fixture's shapes; on the CPU every part in `dtype` (default float32), on
    # CUDA half precision around a float32 residual stream (or float32 throughout, when asked)
    settings = EngineSettings(model=model or fixture.get("model") or DEFAULT_MODEL, device=device, dtype=dtype,
                              precision="mixed" if device.startswith("cuda") else "uniform",
                              token_budget=int(fixture.get("token_budget", 2048)), block=int(fixture.get("block", 128)))
    running = start_engine(settings, **({"load_model": lambda *_, **__: loaded} if loaded is not None else {}))
    engine, loaded = running.engine, running.model

    async def every_job() -> list[dict]:
        rows = []
        for index, job in enumerate(jobs):  # one after another: the same passes on every run
            where = f"jobs[{index}]"
            rows += _rows(job.get("id", where), await _score(engine, job, loaded.name, where, base))
        return rows

    try:
        rows = asyncio.run(every_job())
    finally:
        running.stop()
    return {"format": FORMAT, "fingerprint": running.fingerprint, "machine": machine(device),
            "model": loaded.name, "results": rows}


def _rows(job_id: str, results) -> list[dict]:
    rows = []
    for input_index, queries in enumerate(results):
        for query in msgspec.to_builtins(queries):
            for combination in query["combinations"]:
                for option in combination["options"]:
                    rows.append({"job": job_id, "input": input_index, "query": query["id"],
                                 "values": combination["values"], "option": option["text"],
                                 "logprob": option["logprob"], "p": option["p"], "floor_p": option["floor_p"],
                                 "residual": combination["residual"]})
    return rows


def _key(row: dict) -> str:
    return json.dumps([row["job"], row["input"], row["query"], row["values"], row["option"]], sort_keys=True)


@attrs.frozen
class Report:
    same_fingerprint: bool
    same_machine: bool  # the same CPU family (vendor and vector unit), or both on CUDA

    @property
    def on_cuda(self) -> bool:
        return self.same_machine and self.machines[0] == "cuda"
    machines: tuple[str, str]  # (this run's, the reference's)
    fingerprints: tuple[str, str]  # (this run's, the reference's)
    compared: int
    missing: tuple[str, ...]  # rows of the reference this run lacks, or that only this run has
    max_diff: dict[str, float]
    unequal: int  # rows with any field not bit-identical
    tolerance: float

    @property
    def ok(self) -> bool:
        if self.missing:
            return False
        return all(d <= self.allowed for d in self.max_diff.values()) if self.unequal else True

    @property
    def allowed(self) -> float:
        """The largest difference allowed: 0 on the same fingerprint on CUDA, CROSS_CPU_TOLERANCE on the same
        fingerprint on the CPU, --tolerance under another fingerprint."""
        if self.same_fingerprint:
            return 0.0 if self.on_cuda else CROSS_CPU_TOLERANCE
        return self.tolerance

    def text(self) -> str:
        run, ref = self.fingerprints
        lines = [f"run       {run} on {self.machines[0]}", f"reference {ref} on {self.machines[1]}",
                 f"{self.compared} options compared; "
                 f"{self.unequal} differ in any bit"]
        lines.append("max |difference|: " + ", ".join(f"{k} {v:.3g}" for k, v in self.max_diff.items()))
        if self.missing:
            lines.append(f"{len(self.missing)} rows are not in both: first {self.missing[0]}")
        rule = ("bit-for-bit (same fingerprint on CUDA)" if self.same_fingerprint and self.on_cuda
                else "bit-for-bit (same fingerprint; the CPU promises within "
                f"{CROSS_CPU_TOLERANCE:g})" if self.same_fingerprint and not self.unequal
                else f"within {CROSS_CPU_TOLERANCE:g} (same fingerprint on the CPU: its kernels round by CPU family, "
                "rows and threads)" if self.same_fingerprint else f"tolerance {self.tolerance:g} (another fingerprint)")
        lines.append(f"{'PASS' if self.ok else 'FAIL'}: {rule}")
        return "\n".join(lines)


def compare(run: dict, reference: dict, tolerance: float = 0.0) -> Report:
    if reference.get("format") != FORMAT:
        raise ParityError(f"the reference is not a {FORMAT} file: record one with `spinfc parity --record`")
    mine = {_key(r): r for r in run["results"]}
    theirs = {_key(r): r for r in reference["results"]}
    missing = tuple(sorted(set(mine) ^ set(theirs)))
    max_diff = {field: 0.0 for field in FIELDS}
    unequal = 0
    for key in sorted(set(mine) & set(theirs)):
        a, b = mine[key], theirs[key]
        if any(a[f] != b[f] for f in FIELDS):
            unequal += 1
        for field in FIELDS:
            max_diff[field] = max(max_diff[field], abs(a[field] - b[field]))
    return Report(same_fingerprint=run["fingerprint"] == reference["fingerprint"],
                  same_machine=run.get("machine") is not None and run.get("machine") == reference.get("machine"),
                  machines=(run.get("machine") or "unknown", reference.get("machine") or "unknown"),
                  fingerprints=(run["fingerprint"], reference["fingerprint"]),
                  compared=len(set(mine) & set(theirs)), missing=missing, max_diff=max_diff, unequal=unequal,
                  tolerance=tolerance)


def read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except OSError as error:
        raise ParityError(f"{what} {path} cannot be read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ParityError(f"{what} {path}:{error.lineno}:{error.colno}: not JSON ({error.msg})") from None
