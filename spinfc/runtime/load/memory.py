"""`--max-memory`: what a started server holds on its device, part by part, and the content cache sized so that all
of it stays inside the limit.

    weights      measured: what the process holds after the load, less what it held before, and at least the
                 bytes of the stack's own tensors (on the CPU a load may reuse memory the process freed before,
                 which the resident set does not show)
    state        the recurrent state a pass's contents leave in a layer (Qwen3.5's Gated DeltaNet layers; 0
                 elsewhere): a flow keeps its states layer by layer (`models.state_flow`), at most one content per
                 block of the pass, each Hv x Dk x Dv float32 and the conv state; an estimate (the branches'
                 gathered initial states, and the extraction's recorded states, are not counted: to be measured)
    K/V          the keys and values of a full pass (what the content cache records) and of the extraction
                 decode's pool lanes (`extract.fixed`: the pass's rows and their margin, per lane)
    workspaces   measured: what the start (graph capture, decode warm-up) added beyond the weights, less K/V and
                 state: the graphs' activations and static buffers
    cache        what is left, of which the content cache takes the share it takes of free memory without a limit
                 (`content_cache.default_tokens`; the rest stays for what requests hold while they run: beams,
                 generations, the allocator's slack)

`plan_room` is the accounting, a pure function (sizes in, the cache's room out); `held` measures. On CUDA the limit
is also given to torch's allocator (`torch.cuda.set_per_process_memory_fraction`), so a request that would take the
process past it fails with an out-of-memory error instead. On the CPU the same accounting sizes the cache from the
resident set (nothing caps the process's memory there; workspaces are allocated per pass, not held).
"""

from __future__ import annotations

import os

import attrs
import torch

from spinfc.config.sizes import gib

class MemoryTooSmall(ValueError):
    """A limit that does not hold the server even without a content cache; the message names each part."""


@attrs.frozen
class Footprint:
    """Bytes a started server holds before any request, by part."""

    weights: int
    state: int
    kv: int
    workspaces: int

    @property
    def total(self) -> int:
        return self.weights + self.state + self.kv + self.workspaces

    def text(self) -> str:
        return (f"weights {gib(self.weights)} + state {gib(self.state)} + K/V {gib(self.kv)} + workspaces "
                f"{gib(self.workspaces)} = {gib(self.total)}")


def plan_room(limit: int, footprint: Footprint, free: int, budget: int) -> int:
    """Bytes the limit leaves beside `footprint`, and no more than the device's `free` bytes: what the content
    cache takes its share of (`content_cache.default_tokens`). Raises MemoryTooSmall, naming each part, where the
    footprint alone exceeds `limit` (`budget`: the pass's tokens, which the K/V and workspaces grow with)."""
    if footprint.total > limit:
        raise MemoryTooSmall(f"--max-memory {gib(limit)} does not hold this model at --token-budget {budget:,}: "
                             f"{footprint.text()}; serve a quantized checkpoint (spinfc quantize --scheme w4a16), "
                             "lower --token-budget (K/V and workspaces grow with it) or raise --max-memory")
    return max(0, min(limit - footprint.total, free))


def kv_bytes_per_token(stack) -> int:
    """One token's keys and values over the stack's attention layers (a recurrent layer keeps none)."""
    c = stack.config
    layers = getattr(stack, "attention_layers", c.layers)
    return layers * 2 * c.kv_heads * c.head_dim * torch.tensor([], dtype=stack.dtype).element_size()


def state_bytes(stack, contents: int) -> int:
    """The recurrent state `contents` contents leave in one linear-attention layer (0 without any)."""
    linear = getattr(stack.config, "linear", None)
    if linear is None:
        return 0
    itemsize = torch.tensor([], dtype=stack.dtype).element_size()
    per_layer = (linear.value_heads * linear.key_dim * linear.value_dim * 4
                 + (linear.conv_kernel - 1) * linear.conv_channels * itemsize)
    return (per_layer if any(linear.layers) else 0) * contents


def footprint(stack, weights: int, started: int, kv_tokens: int, contents: int) -> Footprint:
    """The parts of what a start holds: `weights` (measured), `started` (measured: what the start added after the
    load), K/V of `kv_tokens` tokens and the state of `contents` contents (computed); workspaces the rest."""
    kv, state = kv_bytes_per_token(stack) * kv_tokens, state_bytes(stack, contents)
    return Footprint(weights=weights, state=state, kv=kv, workspaces=max(0, started - kv - state))


def held(device: str) -> int:
    """Bytes the process holds on `device` now: torch's reserved memory on an accelerator, once the allocator has
    given back its cached free blocks (a load's transient copies are not weights), the resident set on the CPU
    (Linux /proc/self/statm)."""
    if torch.device(device).type != "cpu":
        torch.accelerator.empty_cache()
        return int(torch.accelerator.memory_reserved(torch.device(device)))
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tensor_bytes(stack) -> int:
    """Bytes of the distinct tensors a stack holds: its tensor attributes and those of its lists and dicts (the
    layers' weights), a quantized layer's through its `tensors()`; each storage counted once."""
    seen: set[int] = set()

    def count(value, depth: int) -> int:
        if isinstance(value, torch.Tensor):
            key = value.untyped_storage().data_ptr()
            if key in seen:
                return 0
            seen.add(key)
            return value.untyped_storage().nbytes()
        if depth == 0:
            return 0
        if isinstance(value, dict):
            return sum(count(v, depth - 1) for v in list(value.values()))
        if isinstance(value, (list, tuple)):
            return sum(count(v, depth - 1) for v in value)
        tensors = getattr(type(value), "tensors", None)
        return count(value.tensors(), 1) if callable(tensors) else 0

    return sum(count(v, 3) for v in list(vars(stack).values()))


def free_bytes(device: str) -> int:
    """Bytes the device has free now (MemAvailable on the CPU)."""
    if torch.device(device).type != "cpu":
        return int(torch.accelerator.get_memory_info(torch.device(device))[0])
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


class Limit:
    """`--max-memory` across one start: what the process held before the load, the weights once loaded (a start
    that cannot fit even without workspaces is refused then, before minutes of capture), and the cache's budget
    once everything is captured."""

    def __init__(self, limit: int, device: str, budget: int, block: int):
        self.limit, self.device, self.budget = limit, device, budget
        self.contents = budget // block  # at most one content starts per block of a pass
        self.before = held(device)
        self.weights, self.kv_tokens = 0, 0
        self.footprint: Footprint | None = None  # once started

    def loaded(self, stack, kv_tokens: int) -> None:
        """Measure the weights; raise MemoryTooSmall where they, the state and the K/V of `kv_tokens` tokens (a
        pass's and the decode's pools) already exceed the limit."""
        self.weights = max(held(self.device) - self.before, tensor_bytes(stack))
        self.kv_tokens = kv_tokens
        plan_room(self.limit, footprint(stack, self.weights, 0, self.kv_tokens, self.contents),
                  free_bytes(self.device), self.budget)

    def started(self, stack) -> int:
        """The content cache's room under the limit (bytes), with the workspaces measured; on CUDA torch's
        allocator is held to the limit from here on."""
        started = held(self.device) - self.before - self.weights
        found = footprint(stack, self.weights, started, self.kv_tokens, self.contents)
        room = plan_room(self.limit, found, free_bytes(self.device), self.budget)
        device = torch.device(self.device)
        if device.type == "cuda":  # (torch's allocator cap is CUDA's own call)
            total = torch.cuda.get_device_properties(device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, self.limit / total), device)
        self.footprint = found
        return room
