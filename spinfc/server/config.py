"""The server's configuration: one struct, filled from the command line (and, later, environment and TOML).

Every setting the server reads lives here, so a new one (a limit, a token, a flag) is one field and one flag.
"""

from __future__ import annotations

import msgspec

from spinfc.registry import DEFAULT_MODEL

CPU_TOKEN_BUDGET = 2048  # one pass takes seconds on a CPU
CUDA_TOKEN_BUDGET = 16384  # the fastest budget for news-length content on a GPU


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    model: str = DEFAULT_MODEL
    host: str = "0.0.0.0"
    port: int = 8000
    device: str | None = None  # None: the first CUDA device when there is one, else the CPU
    dtype: str = "float32"
    token_budget: int | None = None  # None: CPU_TOKEN_BUDGET on a CPU, CUDA_TOKEN_BUDGET on CUDA
    block: int = 128  # every content starts at a multiple of this many rows
    warmup: bool = True  # run one pass before /readyz answers 200
    floor_cache_size: int = 256  # floor results kept, per question set
    log_level: str = "info"

    def resolved_device(self) -> str:
        if self.device:
            return self.device
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"

    def resolved_budget(self) -> int:
        if self.token_budget is not None:
            return self.token_budget
        return CUDA_TOKEN_BUDGET if self.resolved_device().startswith("cuda") else CPU_TOKEN_BUDGET
