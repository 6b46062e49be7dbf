"""A gap budget (`spinfc quantize --max-gap`): the layers kept in the half dtype are the fewest of the sensitivity
order that bring the measured gap within the budget, the checkpoint lists them under `ignore` and records the
choice, and it loads back to the scores of the in-memory model; the choice measures each group once, from its own
layer on, every measurement one forward of its texts packed together."""

from __future__ import annotations

import json
import math

import attrs
import pytest
import torch

from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import Calibration, input_maxima, launches_of, packed_launch
from spinfc.runtime.quant.checkpoint import quantize_state, write_checkpoint
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES
from spinfc.runtime.quant.sensitivity import GROUPS, FromLayer, choose, scored_launch
from spinfc.runtime.weights import read_snapshot

SHAPE = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=256)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(LlamaConfig(**SHAPE, tie_word_embeddings=False), dtype=torch.float32)
    directory = tmp_path_factory.mktemp("llama")
    hf.save_pretrained(directory)
    config, state = read_snapshot(directory)
    g = torch.Generator().manual_seed(1)
    sequences = [torch.randint(0, 96, (int(n),), generator=g).tolist() for n in torch.randint(20, 48, (12,),
                                                                                              generator=g)]
    model = build_model(config, state, weights_hash="f", fuse=False)
    found = Calibration(maxima=input_maxima(model, launches_of(sequences, "cpu")), texts=12, tokens=0,
                        source_sha256="random")
    chosen = SCHEMES["fp8-static"]
    quantized = {k: v for k, v in quantize_state(config, state, found, chosen).items()
                 if isinstance(v, QuantizedLinear)}
    return directory, config, state, sequences, model, found, quantized


def _gap(config, state, found, sequences, kept=()) -> float:
    chosen = SCHEMES["fp8-static"]
    calibration = attrs.evolve(found, kept={"modules": list(kept)})
    q = build_model(config, quantize_state(config, state, calibration, chosen), weights_hash="q", fuse=False)
    f = build_model(config, state, weights_hash="f", fuse=False)
    launches = [scored_launch(s) for s in sequences]
    with torch.inference_mode():
        return float(max((q.forward(x) - f.forward(x)).abs().max() for x in launches))


def test_budget_keeps_the_fewest_groups(setup):
    directory, config, state, sequences, model, found, quantized = setup
    loose = choose(model, quantized, sequences, max_gap=1e9)
    assert loose.modules == () and loose.gap == loose.gap_all_quantized > 0
    budget = loose.gap_all_quantized / 3
    kept = choose(model, quantized, sequences, max_gap=budget)
    assert kept.modules and kept.gap <= budget and kept.gap_all_quantized == loose.gap_all_quantized
    assert abs(_gap(config, state, found, sequences, kept.modules) - kept.gap) < 1e-6  # what it measured
    # one group fewer (the least sensitive of those kept) is over the budget: the choice is the shortest prefix
    least = min(kept.sensitivity, key=kept.sensitivity.get)
    _, _, layer, first = least.split(".", 3)
    members = next(modules for _, modules in GROUPS if modules[0] == first)
    fewer = [m for m in kept.modules if m not in {f"model.layers.{layer}.{x}" for x in members}]
    assert len(fewer) < len(kept.modules) and _gap(config, state, found, sequences, fewer) > budget
    tight = choose(model, quantized, sequences, max_gap=1e-12)
    assert len(tight.modules) == 3 * 7 + 3 and tight.gap == 0.0  # all: the last layer's o/gate/up/down stay float
    # the float stack is restored
    assert all(isinstance(w[s], torch.Tensor) for w in model.layers for s in ("q", "o", "gate", "down"))


def test_checkpoint_records_and_loads_the_kept_layers(setup, tmp_path):
    from spinfc.runtime.load.loader import load_model

    directory, config, state, sequences, model, found, quantized = setup
    all_quantized = choose(model, quantized, sequences, max_gap=1e9).gap_all_quantized
    kept = choose(model, quantized, sequences, max_gap=all_quantized / 2)
    calibration = attrs.evolve(found, kept=kept.summary())
    chosen = SCHEMES["fp8-static"]
    memory = quantize_state(config, state, calibration, chosen)
    assert all(isinstance(memory[f"{m}.weight"], torch.Tensor) for m in kept.modules)
    hf = json.loads((directory / "config.json").read_text())
    write_checkpoint(tmp_path, hf, config, memory, chosen, calibration)
    written = json.loads((tmp_path / "config.json").read_text())
    assert set(kept.modules) <= set(written["quantization_config"]["ignore"])
    summary = json.loads((tmp_path / "calibration.json").read_text())
    assert summary["kept_in_half"]["modules"] == list(kept.modules)
    loaded = load_model(str(tmp_path))
    again = build_model(config, memory, weights_hash="q", fuse=False)
    launch = scored_launch(sequences[0])
    with torch.inference_mode():
        torch.testing.assert_close(loaded.forward(launch), again.forward(launch), rtol=0, atol=1e-6)


def test_a_run_from_a_layer_is_the_whole_stack(setup):
    """`FromLayer`: the float run's layers handed on, then the layers from `first` as they are now, give what the
    whole stack gives (a group quantized at layer `first`, the layers before it float)."""
    directory, config, state, sequences, model, found, quantized = setup
    launch = packed_launch(sequences[:4], every_row=True)
    with torch.inference_mode():
        from_layer = FromLayer(model, launch)
        assert not from_layer.carried
        torch.testing.assert_close(from_layer.float_hidden, model.hidden(launch), rtol=0, atol=0)
        for first in range(config.layers - 1):
            down = model.layers[first]["down"]
            model.layers[first]["down"] = quantized[f"model.layers.{first}.mlp.down_proj.weight"]
            try:
                whole = model.hidden(launch)
                assert not torch.equal(whole, from_layer.float_hidden)  # the quantized layer shows
                torch.testing.assert_close(from_layer.hidden(first), whole, rtol=0, atol=0)
            finally:
                model.layers[first]["down"] = down


def test_each_group_is_measured_once_in_one_launch(setup, monkeypatch):
    """The choice's cost: one forward per measurement (the texts packed into one launch), each group's sensitivity
    measured once from its own layer on, and a bisection over the groups. Before, every text was a forward of its
    own and every group ran the whole stack: on this model 52 sensitivity forwards of 4 layers, 12 per gap."""
    from spinfc.runtime.models.base import Model
    from spinfc.runtime.models.llama import LlamaModel

    directory, config, state, sequences, model, found, quantized = setup
    forwards, layers = [], []
    hidden, layer = Model.hidden, LlamaModel.layer
    monkeypatch.setattr(Model, "hidden", lambda self, launch, context=None: forwards.append(launch.budget) or
                        hidden(self, launch, context))
    monkeypatch.setattr(LlamaModel, "layer", lambda self, index, *args, **kwargs: layers.append(index) or
                        layer(self, index, *args, **kwargs))
    all_quantized = choose(model, quantized, sequences, max_gap=1e9).gap_all_quantized
    forwards.clear(), layers.clear()
    kept = choose(model, quantized, sequences, max_gap=all_quantized / 3)
    groups = sum(1 for k in quantized if k.endswith(("q_proj.weight", "o_proj.weight", "gate_proj.weight",
                                                     "down_proj.weight")))
    steps = math.ceil(math.log2(groups + 1))
    assert kept.modules and groups == 4 * config.layers - 3  # the last layer's o/gate/up/down stay float
    assert len(forwards) <= 3 + groups + steps, forwards
    from_own_layer = sum(config.layers - int(k.split(".")[2]) for k in quantized
                         if k.endswith(("q_proj.weight", "o_proj.weight", "gate_proj.weight", "down_proj.weight")))
    assert len(layers) <= (3 + steps) * config.layers + from_own_layer, len(layers)
