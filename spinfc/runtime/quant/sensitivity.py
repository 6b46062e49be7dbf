"""Which linear layers a W8A8 checkpoint keeps in the half dtype, chosen by a measured gap budget
(`spinfc quantize --max-gap X`).

The gap is the largest |log p difference| to the float32 model over the next-token log-probabilities of the last
`SCORED` tokens of (up to) `GAP_TEXTS` calibration texts: what a score of an answer option is made of. With every
layer quantized, a gap over the budget starts the choice:

1. Sensitivity: each layer group (a layer's q/k/v, its o_proj, its gate/up, its down_proj: the groups that read
   one input) is quantized alone in the float32 model, and the relative error it causes in the final hidden
   states of `SENSITIVITY_TEXTS` texts (every row) is its sensitivity.
2. The groups are kept in the half dtype, most sensitive first: the fewest that bring the gap within the budget
   (a bisection over that order, each step one measurement of the gap), or all of them where none do.

Kept layers run as ordinary half-precision linear layers (the compute dtype on a GPU; float32 on the CPU
reference); the checkpoint lists them under compressed-tensors' `ignore` and `calibration.json` records the budget,
the gaps and each kept group's sensitivity. Every measurement is deterministic (the same model and texts give the
same choice). Each layer's result still depends on its own row alone: the choice is fixed at quantize time.
"""

from __future__ import annotations

import dataclasses

import attrs
import torch

from spinfc.backend.launch import Launch

GAP_TEXTS = 16  # calibration texts whose scored tokens measure the gap (evenly spaced over the file)
SCORED = 32  # the last tokens of each such text whose log p is compared
SENSITIVITY_TEXTS = 4  # texts whose final hidden states rank the groups
# (stack's short names, checkpoint modules under model.layers.N.): one input each
GROUPS = ((("q", "k", "v"), ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
          (("o",), ("self_attn.o_proj",)),
          (("gate", "up"), ("mlp.gate_proj", "mlp.up_proj")),
          (("down",), ("mlp.down_proj",)))


@attrs.frozen
class Kept:
    """The choice: `modules` (checkpoint module names, e.g. model.layers.3.mlp.down_proj) kept in the half dtype."""

    modules: tuple[str, ...]
    max_gap: float
    gap: float  # measured with `modules` kept
    gap_all_quantized: float
    sensitivity: dict[str, float]  # kept group (its first module) -> relative hidden-state error it caused

    def summary(self) -> dict:
        return {"max_gap": self.max_gap, "gap": round(self.gap, 4),
                "gap_all_quantized": round(self.gap_all_quantized, 4), "modules": list(self.modules),
                "sensitivity": {k: round(v, 5) for k, v in self.sensitivity.items()}}


def scored_launch(tokens: list[int], scored: int = SCORED) -> Launch:
    """One causal sequence whose last `scored` positions each read the log p of the token after them."""
    T = len(tokens) - 1
    start = max(0, T - scored)
    rows = torch.arange(start, T)
    return Launch(tokens=torch.tensor(tokens[:T]), positions=torch.arange(T),
                  ends=torch.full((T,), T, dtype=torch.int32), spans=((0, T),), rows=rows,
                  read_row=torch.arange(len(rows)), read_token=torch.tensor(tokens[start + 1:T + 1]))


def every_row(launch: Launch) -> Launch:
    T = launch.budget
    return dataclasses.replace(launch, rows=torch.arange(T), read_row=torch.zeros(0, dtype=torch.int64),
                               read_token=torch.zeros(0, dtype=torch.int64))


def _spaced(sequences: list[list[int]], count: int) -> list[list[int]]:
    long_enough = [s for s in sequences if len(s) > 2]
    step = max(1, len(long_enough) // count)
    return long_enough[::step][:count]


@torch.inference_mode()
def choose(model, quantized: dict, sequences: list[list[int]], max_gap: float, log=lambda text: None) -> Kept:
    """Choose the groups to keep. `model`: the float32 stack (unfused, on the CPU: its layers are swapped in
    place and restored); `quantized`: checkpoint weight name -> its `QuantizedLinear` (every quantizable layer);
    `sequences`: the calibration texts' token ids."""
    names = [(i, shorts, modules) for i in range(model.config.layers) for shorts, modules in GROUPS
             if f"model.layers.{i}.{modules[0]}.weight" in quantized]
    floats = {(i, s): model.layers[i][s] for i, shorts, _ in names for s in shorts}

    def use(kept: set[int]) -> None:
        for n, (i, shorts, modules) in enumerate(names):
            for s, m in zip(shorts, modules):
                model.layers[i][s] = floats[(i, s)] if n in kept else quantized[f"model.layers.{i}.{m}.weight"]

    gap_launches = [scored_launch(s) for s in _spaced(sequences, GAP_TEXTS)]
    hidden_launches = [every_row(scored_launch(s, len(s))) for s in _spaced(sequences, SENSITIVITY_TEXTS)]
    every = set(range(len(names)))
    try:
        use(every)
        reference = torch.cat([model.forward(launch) for launch in gap_launches])
        hidden = [model.hidden(launch) for launch in hidden_launches]

        def gap(kept: set[int]) -> float:
            use(kept)
            return float((torch.cat([model.forward(launch) for launch in gap_launches]) - reference).abs().max())

        all_quantized = gap(set())
        log(f"gap with every layer quantized: {all_quantized:.3f} (budget {max_gap:g})")
        if all_quantized <= max_gap:
            return Kept((), max_gap, all_quantized, all_quantized, {})
        sensitivity = {}
        for n in range(len(names)):
            use(every - {n})
            error = sum(float((model.hidden(launch) - h).pow(2).sum()) for launch, h in zip(hidden_launches, hidden))
            sensitivity[n] = error / sum(float(h.pow(2).sum()) for h in hidden)
        order = sorted(sensitivity, key=lambda n: (-sensitivity[n], n))
        low, high, found = 0, len(order), {len(order): 0.0}  # the fewest kept (a prefix of `order`) within budget
        while low < high:
            middle = (low + high) // 2
            found[middle] = gap(set(order[:middle]))
            log(f"{middle} of {len(order)} layer groups kept: gap {found[middle]:.3f}")
            if found[middle] <= max_gap:
                high = middle
            else:
                low = middle + 1
        kept = order[:low]
        modules = tuple(f"model.layers.{names[n][0]}.{m}" for n in sorted(kept) for m in names[n][2])
        return Kept(modules, max_gap, found.get(low, 0.0), all_quantized,
                    {f"model.layers.{names[n][0]}.{names[n][2][0]}": sensitivity[n] for n in kept})
    finally:
        use(every)
