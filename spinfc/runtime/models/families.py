"""The families spinfc runs, one line each: the family's name, what the user reads it as, the `model_type`s of a
config.json it reads, and its home under `spinfc/runtime/models/` (a file, or a folder for a family with towers
or several parts). That home ends with `FAMILY = FamilySpec(...)`: its config reader, its stack (whose
`LAYER_WEIGHTS` are its weight names), how a multimodal checkpoint's names become the text stack's, its towers,
whether it is recurrent, which of its checkpoints are decision models (vLLM's registry does the same:
`"LlamaForCausalLM": ("llama", "LlamaForCausalLM")`, each family's file building its layers from shared modules).

A new family is its home and one line in `FAMILIES`; nothing else in spinfc names it (tests/layers/
test_families.py checks both). The homes are imported when a family is first asked for, so this table imports
none of them.

    from_hf(hf)              config.json (a dictionary) -> the family's `ModelConfig`
    build_model(config, state, **options)   the family's stack on a state dict in Hugging Face naming
    family_of(name)          a table entry by family name (a config's `family`)
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import attrs

from spinfc import registry
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel
from spinfc.runtime.weights.decision_head import codes_of, is_decision


@attrs.frozen
class FamilySpec:
    """What a family's home declares about it (its `FAMILY`)."""

    read_config: Callable[[dict], ModelConfig]  # config.json of one of its model_types -> its config
    stack: type  # the `Model` subclass that runs it
    config: type[ModelConfig] = ModelConfig  # the class its configs are (read back from JSON as that)
    # (state, towers) -> a snapshot's weights as the snapshot reader hands them on: a multimodal checkpoint's text
    # weights in the text stack's names, and with `towers` the towers' beside them; None: as they were saved
    snapshot_weights: Callable[[dict, bool], dict] | None = None
    # (hf, state, directory, *, device, dtype, load) -> `towers.Towers` or None: pops the towers' weights from
    # `state` (and renames the text stack's where a multimodal checkpoint names them otherwise)
    towers: Callable[..., Any] | None = None
    recurrent: bool = False  # layers that carry a state through a sequence (no content cache; eager decodes)
    decision_types: tuple[str, ...] = ()  # the model_types whose `*ForSequenceClassification` it reads
    smoothing_refused: str | None = None  # why `spinfc quantize --smoothing` cannot smooth it; None: it can
    gguf: Any = None  # how its GGUF files are read (`weights.gguf_file.GgufReading`); None: it reads none


@attrs.frozen
class Family:
    name: str  # a config's `family`
    title: str  # how messages name it
    model_types: tuple[str, ...]  # config.json's `model_type`s it reads
    home: str  # its module under spinfc.runtime.models (a file or a folder)

    @property
    def spec(self) -> FamilySpec:
        return _declared(self.home)


@cache
def _declared(home: str) -> FamilySpec:
    """The `FAMILY` a home declares (imported on the first question about its family)."""
    return importlib.import_module(f"spinfc.runtime.models.{home}").FAMILY


FAMILIES = (
    Family("llama", "Llama", ("llama",), "llama"),
    Family("qwen3", "Qwen3", ("qwen3",), "qwen3"),
    Family("gemma3", "Gemma 3", ("gemma3_text", "gemma3"), "gemma3"),
    Family("gemma4", "Gemma 4", ("gemma4_text", "gemma4"), "gemma4"),
    Family("qwen3_5", "Qwen3.5", ("qwen3_5_text", "qwen3_5", "qwen3_5_moe_text", "qwen3_5_moe"), "qwen3_5"),
    Family("mistral", "Mistral", ("mistral",), "mistral"),
)
BY_NAME = {family.name: family for family in FAMILIES}
BY_MODEL_TYPE = {model_type: family for family in FAMILIES for model_type in family.model_types}


def family_of(name: str) -> Family:
    """The table's entry for a family name (a `ModelConfig.family`)."""
    if name not in BY_NAME:
        raise UnsupportedModel(f"no model family {name!r}; spinfc runs {', '.join(BY_NAME)}")
    return BY_NAME[name]


def spec_of(config: ModelConfig) -> FamilySpec:
    return family_of(config.family).spec


def for_model_type(model_type: Any) -> Family:
    if model_type not in BY_MODEL_TYPE:
        raise UnsupportedModel(f"model_type {model_type!r} is not supported; spinfc runs "
                               f"{', '.join(BY_MODEL_TYPE)}")
    return BY_MODEL_TYPE[model_type]


def from_hf(hf: dict[str, Any]) -> ModelConfig:
    """Read a Hugging Face `config.json` dictionary through its family's reader; a `*ForSequenceClassification`
    checkpoint of a family that reads one is a decision model (`codes`: weights/decision_head.py)."""
    codes = decision_codes(hf)
    config = for_model_type(hf.get("model_type")).spec.read_config(hf)
    return config if codes is None else attrs.evolve(config, codes=codes)


def decision_codes(hf: dict[str, Any]) -> tuple[str, ...] | None:
    """A decision model's codes (None for a model whose head reads the vocabulary); refused for a model_type no
    family reads the decision head of."""
    if not is_decision(hf):
        return None
    deciding = [f for f in FAMILIES if f.spec.decision_types]
    readers = [model_type for f in deciding for model_type in f.spec.decision_types]
    titles = [f.title for f in deciding]
    named = f"{', '.join(titles[:-1])} and {titles[-1]}" if len(titles) > 1 else titles[0]
    return codes_of(hf, UnsupportedModel, readers, named)


def codes_of_model(name: str | None) -> tuple[str, ...]:
    """The codes of the named model (empty for a model that reads its vocabulary), from its config.json alone (no
    weights): what `spinfc compile` tokenizes a pack's code questions with."""
    source = registry.resolve(name)
    if source.gguf is not None:
        return ()
    return decision_codes(json.loads((registry.snapshot_directory(source) / "config.json").read_text())) or ()


def config_from_json(text: str) -> ModelConfig:
    """A config `ModelConfig.to_json` wrote, as its family's class."""
    return family_of(json.loads(text)["family"]).spec.config.from_json(text)


def build_model(config: ModelConfig, state_dict: dict, **options):
    """The stack of `config.family`, built from a state dict in Hugging Face naming; `options` go to `Model`
    (ops, name, weights_hash, dtype, device, ...)."""
    return spec_of(config).stack(config, state_dict, **options)


def towers_of(hf: dict, state: dict, directory, **options):
    """The towers a multimodal snapshot has (None for a text-only one or a family without towers): its family's
    `towers` (see `FamilySpec.towers`; `options`: device, dtype, load)."""
    towers = for_model_type(hf.get("model_type")).spec.towers
    return towers(hf, state, directory, **options) if towers is not None else None


def is_recurrent(config: ModelConfig) -> bool:
    return spec_of(config).recurrent
