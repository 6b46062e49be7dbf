"""Which linear layers a W8A8 checkpoint keeps in the half dtype, chosen by a measured gap budget
(`spinfc quantize --max-gap X`).

The gap is the largest |log p difference| to the float32 model over the next-token log-probabilities of the last
`SCORED` tokens of (up to) `GAP_TEXTS` calibration texts: what a score of an answer option is made of. With every
layer quantized, a gap over the budget starts the choice:

1. Sensitivity, measured once per layer group (a layer's q/k/v, its o_proj, its gate/up, its down_proj: the groups
   that read one input): the group is quantized alone in the float32 model, and the relative error it causes in
   the final hidden states of `SENSITIVITY_TEXTS` texts (every row) is its sensitivity. The layers before the
   group's are float32 in that run, so their outputs are the float run's: they are computed once and the run
   starts at the group's layer (half the layers of a stack, on average).
2. The groups are kept in the half dtype, most sensitive first: the fewest that bring the gap within the budget
   (a bisection over that order, each step one measurement of the gap), or all of them where none do.

Each measurement is one forward of its texts packed into one launch (each text its own span, so none sees
another): a small model's forward of a 20-token text is its weights read for 20 rows, and packing reads them once
for all. On this 2-core CPU that took `spinfc quantize smollm2-135m --scheme fp8-dynamic --max-gap 0.25` from
over 45 minutes (a forward per text, the whole stack per group) to a few (benchmarks/NOTES.md).

Kept layers run as ordinary half-precision linear layers (the compute dtype on a GPU; float32 on the CPU
reference); the checkpoint lists them under compressed-tensors' `ignore` and `calibration.json` records the budget,
the gaps and each kept group's sensitivity. Every measurement is deterministic (the same model and texts give the
same choice). Each layer's result still depends on its own row alone: the choice is fixed at quantize time.
"""

from __future__ import annotations

import copy

import attrs
import torch

from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import Launch
from spinfc.runtime.quant.calibrate import packed_launch
from spinfc.runtime.quant.progress import Silent

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
    return packed_launch([tokens], scored=scored)


def _spaced(sequences: list[list[int]], count: int) -> list[list[int]]:
    long_enough = [s for s in sequences if len(s) > 2]
    step = max(1, len(long_enough) // count)
    return long_enough[::step][:count]


class FromLayer:
    """The final hidden states of one launch with every layer before `first` taken from a float run: those layers'
    outputs (x, residual) are recorded once and handed on, so a run that changes layer `first` computes only the
    layers from it on. Where a stack's layers hand each other more than (x, residual) (Gemma 4's per-layer inputs
    and shared keys, a recurrent flow), every run is the whole stack."""

    def __init__(self, model, launch: Launch):
        self.model, self.launch, self.outputs = model, launch, []
        recording = copy.copy(model)  # the model's own forward, each layer's output kept as it is handed on

        def layer(index, x, residual, context, keep=None):
            out = type(model).layer(recording, index, x, residual, context, keep)
            self.outputs.append(out)
            return out

        recording.layer = layer
        context = ForwardContext(launch)
        self.float_hidden = recording.hidden(launch, context)  # [R, D]
        self.carried = context.per_layer is not None or bool(context.shared_kv) or context.flow is not None

    def hidden(self, first: int) -> torch.Tensor:
        """[R, D]: the model's final hidden states, its layers from `first` on run as they are now."""
        if self.carried or first == 0:
            return self.model.hidden(self.launch)
        view, model, outputs = copy.copy(self.model), self.model, self.outputs

        def layer(index, x, residual, context, keep=None):
            if index < first:
                return outputs[index]
            return type(model).layer(view, index, x, residual, context, keep)

        view.layer = layer
        return view.hidden(self.launch)


@torch.inference_mode()
def choose(model, quantized: dict, sequences: list[list[int]], max_gap: float, steps=None) -> Kept:
    """Choose the groups to keep. `model`: the float32 stack (unfused, on the CPU: its layers are swapped in
    place and restored); `quantized`: checkpoint weight name -> its `QuantizedLinear` (every quantizable layer);
    `sequences`: the calibration texts' token ids; `steps` (`progress.Steps`) hears each measurement."""
    steps = steps or Silent()
    names = [(i, shorts, modules) for i in range(model.config.layers) for shorts, modules in GROUPS
             if f"model.layers.{i}.{modules[0]}.weight" in quantized]
    floats = {(i, s): model.layers[i][s] for i, shorts, _ in names for s in shorts}

    def use(kept: set[int]) -> None:
        for n, (i, shorts, modules) in enumerate(names):
            for s, m in zip(shorts, modules):
                model.layers[i][s] = floats[(i, s)] if n in kept else quantized[f"model.layers.{i}.{m}.weight"]

    gap_launch = packed_launch(_spaced(sequences, GAP_TEXTS), scored=SCORED)
    every = set(range(len(names)))
    steps.say(f"measuring the gap to float32 on {len(gap_launch.spans)} calibration texts "
              f"({len(gap_launch.read_token)} scored tokens)")
    try:
        use(every)
        reference = model.forward(gap_launch)  # [N]
        from_layer = FromLayer(model, packed_launch(_spaced(sequences, SENSITIVITY_TEXTS), every_row=True))
        hidden = from_layer.float_hidden  # [R, D]

        def gap(kept: set[int]) -> float:
            use(kept)
            return float((model.forward(gap_launch) - reference).abs().max())

        all_quantized = gap(set())
        steps.say(f"gap with every layer quantized: {all_quantized:.3f} (budget {max_gap:g})")
        if all_quantized <= max_gap:
            return Kept((), max_gap, all_quantized, all_quantized, {})
        sensitivity = {}
        for n in steps.over(range(len(names)), len(names), "measuring each layer group quantized alone"):
            use(every - {n})
            sensitivity[n] = float((from_layer.hidden(names[n][0]) - hidden).pow(2).sum() / hidden.pow(2).sum())
        order = sorted(sensitivity, key=lambda n: (-sensitivity[n], n))
        low, high, found = 0, len(order), {len(order): 0.0}  # the fewest kept (a prefix of `order`) within budget
        while low < high:
            middle = (low + high) // 2
            found[middle] = gap(set(order[:middle]))
            steps.say(f"{middle} of {len(order)} layer groups kept: gap {found[middle]:.3f}")
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
