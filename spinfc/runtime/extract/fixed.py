"""The fixed shapes of the extraction decode on CUDA: the launch row count (checked row-invariant), the slot sizes,
and what is kept from launch to launch per model: the pool's buffers (`kv.PoolStorage`) and, per launch shape, a
`Workspace` of static buffers with its captured CUDA graph (step.py runs them)."""

from __future__ import annotations

import weakref

import torch

from spinfc.backend.invariance import NotRowInvariant, check_row_invariance
from spinfc.runtime.extract.kv import KeyPool, PoolStorage, is_recurrent, kv_shapes, stack_of

# Rows of every decode launch on CUDA: one row count for all of them (one GEMM shape each, so a row's bits never
# depend on how many beams are live); a multiple of the 128-row tiles, and above the ~48 beams a pass of the seed
# job searches at width 4, so one launch per step there. Every GEMM of the model is checked row-invariant at this
# count (each row's bits independent of the other rows') before the first decode on a GPU, as a server's pass is;
# where one is not, the next count that passes is used (`launch_rows`), the same for the whole process.
CUDA_ROWS = 128
CUDA_ROWS_FALLBACK = (256, 512)
# Rows per slot: the smallest of these that holds a walk's longest answer plus the prompt's last token.
SLOT_TOKENS = (17, 33, 65, 129, 257, 513, 1025)
# A pool's first buffers on CUDA: the pass's rows and this much again (at least) for contexts appended to it.
POOL_MARGIN = 4096
# Passes' decodes that take turns on CUDA, each in a lane of its own: its own pool buffers and captured steps (a
# second decode in one lane's buffers would overwrite the first's). A lane costs one more pool (the pass's rows and
# POOL_MARGIN of keys and values in every layer: 2.7 GB at the Llama-3-8B shape and the default budget).
CUDA_LANES = 2


def pool_rows(pass_rows: int) -> int:
    """Rows of one lane's pool buffers for passes of `pass_rows` rows: the pass's and their margin."""
    return pass_rows + max(POOL_MARGIN, pass_rows // 4)


def has_fixed_pools(stack, device: torch.device) -> bool:
    """Whether the stack's decode keeps fixed pool buffers on `device`: on CUDA, where it is not recurrent (a
    recurrent stack's decode runs eagerly, on the pass's own keys: extract/recurrent.py)."""
    return device.type == "cuda" and not is_recurrent(stack)


def pool_tokens(model, pass_rows: int) -> int:
    """Tokens of keys and values the decode's fixed pools hold, every lane (0 where it has none)."""
    stack, _ = stack_of(model)
    return CUDA_LANES * pool_rows(pass_rows) if has_fixed_pools(stack, stack.device) else 0


def slot_tokens(longest: int) -> int:
    """G for a walk whose slots hold at most `longest` rows."""
    return next((g for g in SLOT_TOKENS if g >= longest), longest)


class Workspace:
    """The static buffers (and the captured graph) of one CUDA launch shape."""

    def __init__(self, stack, rows: int, slot_rows: int, pool: KeyPool):
        c, device = stack.config, stack.device
        dtype = pool.keys[0].dtype
        self.rows, self.slots, self.slot_rows = rows, rows, slot_rows
        self.own = own_buffers(c, rows + 1, slot_rows, dtype, device)
        self.own_positions = torch.zeros((rows + 1, slot_rows), dtype=torch.int64, device=device)
        self.table = torch.zeros((rows + 1, int(pool.positions.shape[0])), dtype=torch.int32, device=device)
        self.table_count = torch.zeros(rows + 1, dtype=torch.int32, device=device)
        self.inputs = padding_inputs(rows, rows, device)  # [5, N]: tokens, positions, slots, tables, own
        self.graph: torch.cuda.CUDAGraph | None = None
        self.output: torch.Tensor | None = None


def own_buffers(config, slots: int, slot_rows: int, dtype: torch.dtype, device) -> list[torch.Tensor]:
    """Per layer, the slots' own keys and values: [2, slots, slot_rows, Hk, D] (zeros), Hk and D the layer's."""
    return [torch.zeros((2, slots, slot_rows, *shape), dtype=dtype, device=device) for shape in kv_shapes(config)]


_WORKSPACES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # stack -> {shape: _Workspace}
_STORAGE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # stack -> {lane: PoolStorage}
_CHECKED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # stack -> its decode launch rows (checked)


def padding_inputs(rows: int, slots: int, device) -> torch.Tensor:
    """[5, rows] int64 of padding rows: token 0 at position 0, the scratch slot and the empty table, own 1."""
    inputs = torch.zeros((5, rows), dtype=torch.int64, device=device)
    inputs[2:4] = slots
    inputs[4] = 1
    return inputs


def launch_rows(model) -> int:
    """The row count of the stack's decode launches on CUDA: `CUDA_ROWS`, or the first fallback at which every
    product is row-invariant (checked once per stack). Raises NotRowInvariant when none is."""
    stack, lock = stack_of(model)
    if stack not in _CHECKED:
        failures = []
        for rows in (CUDA_ROWS, *CUDA_ROWS_FALLBACK):
            try:
                with lock:
                    check_row_invariance(stack, rows, rows)
            except NotRowInvariant as error:
                failures.append(str(error))
                continue
            _CHECKED[stack] = rows
            break
        else:
            raise NotRowInvariant("no decode launch size is row invariant: " + " / ".join(failures))
    return _CHECKED[stack]


def pool_storage(model, rows: int, like: torch.Tensor, lane: int = 0) -> PoolStorage | None:
    """The stack's fixed pool buffers of `lane` (below CUDA_LANES) on CUDA (sized for a pass of `rows` rows and its
    contexts), else None."""
    stack, _ = stack_of(model)
    if not has_fixed_pools(stack, like.device):
        return None
    if not 0 <= lane < CUDA_LANES:
        raise ValueError(f"decode lane {lane} of {CUDA_LANES}")
    shapes = kv_shapes(stack.config)
    lanes = _STORAGE.setdefault(stack, {})
    storage = lanes.get(lane)
    if storage is None or not storage.fits(shapes, like.dtype):
        storage = lanes[lane] = PoolStorage(shapes, like.dtype, like.device, pool_rows(rows))
    return storage


def workspace(stack, rows: int, slot_rows: int, pool: KeyPool) -> Workspace:
    """The stack's workspace for launches of `rows` rows and `slot_rows` rows a slot over `pool` (made on first
    use; those over buffers the pool's storage no longer has are dropped, another lane's kept)."""
    kept = _WORKSPACES.setdefault(stack, {})
    for stale in [s for s in kept if s[2][0] == pool.version[0] and s[2] != pool.version]:
        del kept[stale]  # the pool moved: graphs over the old buffers are useless
    shape = (rows, slot_rows, pool.version)
    if shape not in kept:
        kept[shape] = Workspace(stack, rows, slot_rows, pool)
    return kept[shape]
