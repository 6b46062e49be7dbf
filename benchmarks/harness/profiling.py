"""Where a served pass's GPU time goes: torch's profiler (CUDA activity) inside the `spinfc serve` process, started
and stopped by the study over files, and its kernels sorted into the parts of a pass.

    in the server   `watch(folder)` (called by a study's loader, harness/serve_app.py): a daemon thread that starts
                    the profiler when `folder/start` appears and, when `folder/stop` appears, writes the kernels of
                    that window to `folder/kernels.json` ([name, start us, duration us] each) and then `folder/done`
    in the study    `Window(folder)`: `with Window(folder) as window:` around the requests to profile; then
                    `window.kernels()`, and `breakdown(kernels, wall_s)` for the parts

The profiler records the GPU's kernels whatever thread or CUDA graph launched them (CUPTI), so the window holds the
engine's passes exactly as they are served, with the HTTP, scheduling and staging around them."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

# (part, substrings of a kernel's lower-cased name), the first match wins: order matters (a `_quant_rms_norm` is
# the norm writing fp8, counted with the norms; a GEMM's name mentions its dtype, so products come first)
PARTS = (
    ("products", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "scaled_mm", "matmul", "_mm_", "wgmma", "w4a16")),
    ("attention", ("attention", "attn", "flash", "fmha", "block_list")),
    ("recurrent scan", ("chunk", "recurrent", "delta", "conv1d", "causal_conv", "l2norm", "solve_tril", "cumsum")),
    ("answer head", ("log_softmax", "logsumexp", "softmax", "answer_head")),
    ("row gathers", ("gather", "scatter", "index")),  # torch's indexing: a recurrent layer's rows by level
    ("norms/rope/activations", ("norm", "rope", "rotary", "silu", "gelu", "swiglu", "act", "residual", "embed")),
    ("quantize", ("quant", "fp8", "scale", "amax")),
    ("copies", ("memcpy", "memset", "copy", "fill", "cat")),
)
SHORT_GAP_US = 10.0  # a gap under this between two kernels is launch latency inside a pass; over 100 us, host work


def part_of(name: str) -> str:
    lowered = name.lower()
    return next((part for part, keys in PARTS if any(key in lowered for key in keys)), "other elementwise")


def watch(folder: str | Path) -> threading.Thread:
    """Start the server side: a daemon thread waiting for the study's `start` file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=_serve_profiles, args=(folder,), daemon=True, name="spinfc-profile")
    thread.start()
    return thread


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.02)


def _serve_profiles(folder: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    while True:  # one window per start/stop pair
        _wait_for(folder / "start")
        (folder / "start").unlink()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            (folder / "started").touch()
            _wait_for(folder / "stop")
            torch.cuda.synchronize()
        (folder / "stop").unlink()
        trace = folder / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
        kernels = [[e["name"], e["ts"], e["dur"]] for e in events
                   if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
        trace.unlink()
        (folder / "kernels.json").write_text(json.dumps(sorted(kernels, key=lambda k: k[1])))
        (folder / "done").touch()


class Window:
    """The study's side of one profiled window (`watch` running in the server on the same folder)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def __enter__(self) -> Window:
        for name in ("started", "done", "kernels.json"):
            (self.folder / name).unlink(missing_ok=True)
        (self.folder / "start").touch()
        _wait_for(self.folder / "started")
        return self

    def __exit__(self, *exc) -> None:
        (self.folder / "stop").touch()
        _wait_for(self.folder / "done")

    def kernels(self) -> list[list]:
        return json.loads((self.folder / "kernels.json").read_text())


def breakdown(kernels: list[list], wall_s: float) -> dict:
    """The window's GPU time by part (ms), the idle time between kernels (short gaps: launch latency; long: the
    host between passes), the time outside the kernels' span (the request's host work before the first kernel
    and after the last), and the 15 kernels that took longest in all."""
    if not kernels:
        return {"error": "no kernels were recorded"}
    parts: dict[str, float] = {}
    by_name: dict[str, float] = {}
    gaps = {"under 10 us": 0.0, "10-100 us": 0.0, "over 100 us": 0.0}
    end = kernels[0][1]
    for name, start, duration in kernels:
        parts[part_of(name)] = parts.get(part_of(name), 0.0) + duration
        by_name[name] = by_name.get(name, 0.0) + duration
        gap = start - end
        if gap > 0:
            gaps["under 10 us" if gap < SHORT_GAP_US else "10-100 us" if gap < 100 else "over 100 us"] += gap
        end = max(end, start + duration)
    span_us = end - kernels[0][1]
    busy = sum(parts.values())
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:15]
    return {"wall_ms": round(wall_s * 1000, 2), "kernel_span_ms": round(span_us / 1000, 2),
            "busy_ms": round(busy / 1000, 2),
            "parts_ms": {k: round(v / 1000, 3) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])},
            "idle_ms": {k: round(v / 1000, 3) for k, v in gaps.items()},
            "outside_span_ms": round(wall_s * 1000 - span_us / 1000, 2), "kernels": len(kernels),
            "top": [[name[:90], round(us / 1000, 2)] for name, us in top]}
