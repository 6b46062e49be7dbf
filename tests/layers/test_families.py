"""A family is its home and one line of the family table (DESIGN.md, issue 35; vLLM's registry): read from the
source, each family's parts are defined in its home (`spinfc/runtime/models/<home>.py` or `<home>/`), no other
module names a family or one of its `model_type`s, and Mistral, a Llama-shaped family, is one file and one line.
That its stack scores as transformers' does is tests/runtime/test_parity_random.py's to show."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import attrs
import pytest

from spinfc.runtime.models import families
from spinfc.runtime.models.families import FAMILIES, config_from_json, from_hf
from spinfc.runtime.weights.config import ModelConfig

PACKAGE = Path(__file__).resolve().parents[2] / "spinfc"
MODELS = PACKAGE / "runtime" / "models"
TABLE = MODELS / "families.py"


def home_files(family) -> set[Path]:
    file, folder = MODELS / f"{family.home}.py", MODELS / family.home
    return {file} if file.is_file() else set(folder.rglob("*.py"))


def test_every_home_is_a_file_or_a_folder_declaring_its_family():
    for family in FAMILIES:
        assert home_files(family), f"{family.name}: no {family.home}.py or {family.home}/ under runtime/models"
        assert isinstance(family.spec, families.FamilySpec)
        assert family.spec.stack.family == family.name


def test_every_part_of_a_family_is_defined_in_its_home():
    for family in FAMILIES:
        spec, home = family.spec, f"spinfc.runtime.models.{family.home}"
        parts = [spec.read_config, spec.stack, spec.snapshot_weights, spec.towers]
        parts += [] if spec.config is ModelConfig else [spec.config]  # a family with fields of its own
        for part in filter(None, parts):
            assert part.__module__ == home or part.__module__.startswith(home + "."), (family.name, part)
        for name in ("read_config", "undo", "hf_keys"):
            part = getattr(spec.gguf, name, None)
            assert part is None or inspect.getmodule(part).__name__.startswith(home), (family.name, name)


def _named_strings(path: Path) -> set[str]:
    """Every string constant of a module's code (not its docstrings or comments: text that is only a name)."""
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_only_the_table_and_its_home_name_a_family():
    named = {}
    for family in FAMILIES:
        for word in (family.name, *family.model_types):
            named[word] = family
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path == TABLE:
            continue
        for word in _named_strings(path) & set(named):
            if path not in home_files(named[word]):
                found.append(f"{path.relative_to(PACKAGE.parent)} names {word!r}")
    assert not found, "ask the family table (runtime/models/families.py) instead: " + "; ".join(sorted(found))


def test_a_llama_shaped_family_is_one_file_and_one_line():
    mistral = families.BY_NAME["mistral"]
    assert home_files(mistral) == {MODELS / "mistral.py"}
    mentions = {path: [line for line in path.read_text().splitlines() if "mistral" in line.lower()]
                for path in PACKAGE.rglob("*.py")}
    mentions = {path: lines for path, lines in mentions.items() if lines}
    assert set(mentions) == {TABLE, MODELS / "mistral.py"}
    assert len(mentions[TABLE]) == 1  # its line of FAMILIES
    assert len((MODELS / "mistral.py").read_text().splitlines()) < 50


def test_model_config_holds_only_what_every_family_has():
    assert {field.name for field in attrs.fields(ModelConfig)} == {
        "family", "hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "rope_theta",
        "norm_eps", "tie_embeddings", "codes"}


def _hf_configs():
    from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen3_5TextConfig, Qwen3Config

    from tests.runtime.gemma4_shapes import gemma4_config
    from tests.runtime.qwen3_5_random import SHAPE as QWEN3_5

    shape = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16)
    return {"llama": LlamaConfig(**shape), "qwen3": Qwen3Config(**shape), "gemma3": Gemma3TextConfig(**shape),
            "gemma4": gemma4_config("gemma4-e2b"), "qwen3_5": Qwen3_5TextConfig(**QWEN3_5),
            "mistral": MistralConfig(**shape, sliding_window=5)}


@pytest.mark.parametrize("name", [family.name for family in FAMILIES])
def test_a_config_json_is_read_by_its_family_and_read_back_as_its_class(name):
    config = from_hf(_hf_configs()[name].to_dict())
    assert config.family == name and type(config) is families.BY_NAME[name].spec.config
    assert config_from_json(config.to_json()) == config


def test_a_cached_config_written_when_one_class_held_every_family_reads_back():
    """A GGUF conversion cached before the family table (weights/cache.py) carries every family's fields."""
    old = ('{"codes": null, "experts": null, "family": "llama", "gemma4": null, "head_dim": 16, "heads": 4, '
           '"hidden": 64, "intermediate": 96, "kv_heads": 2, "layers": 3, "linear": null, "mrope_sections": null, '
           '"norm_eps": 1e-05, "query_pre_attn_scalar": null, "rope_local_theta": null, "rope_theta": 10000.0, '
           '"rotary_dim": null, "sliding_layers": [], "sliding_window": null, "tie_embeddings": true, "vocab": 96}')
    assert config_from_json(old) == ModelConfig(family="llama", hidden=64, layers=3, heads=4, kv_heads=2,
                                                head_dim=16, intermediate=96, vocab=96, rope_theta=10000.0,
                                                norm_eps=1e-5, tie_embeddings=True)
