"""A model folder read so that whatever is wrong with it is one line naming the file, the key or the tensor, and
what to do (`BadModelFiles`), never a library's traceback: `spinfc serve`, `spinfc quantize` and the router's
models all read folders through these.

    hf_config(directory)          config.json as a dictionary: missing, not JSON, or not an object is one line
    model_config(directory, hf)   the `ModelConfig` it describes: a missing key, a key of the wrong type or an
                                  unknown model_type names config.json and the key
    check_tokenizer(directory)    the tokenizer's files are there (from the registry, which reads the tokenizer
                                  while a server loads, so a folder without one fails then, not at a request)
    naming_files(location)        around building a stack: a tensor missing, of the wrong shape or of no use
                                  (`WeightMismatch`) names the file that holds it (or should)

A weights file that is not whole is told before it is read (whole.py).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from spinfc import registry
from spinfc.errors import BadModelFiles
from spinfc.registry import TOKENIZER_FILES, check_tokenizer  # noqa: F401 (re-exported)
from spinfc.runtime.models.families import from_hf
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, WeightMismatch

# Keys of a config.json (or of its text_config) that must be positive integers where present, and numbers
_COUNTS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
           "intermediate_size", "vocab_size")
_NUMBERS = ("rms_norm_eps", "rope_theta")
RESTORE = "restore it from the model's original config.json (or download the model again)"


def hf_config(directory: Path) -> dict:
    """config.json of `directory`, as a dictionary."""
    path = Path(directory) / "config.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadModelFiles(f"{path}: missing: a model folder needs its config.json; {RESTORE}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BadModelFiles(f"{path}: cannot be read ({error}); {RESTORE}") from None
    try:
        hf = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadModelFiles(f"{path}:{error.lineno}:{error.colno}: not JSON ({error.msg}); {RESTORE}") from None
    if not isinstance(hf, dict):
        raise BadModelFiles(f"{path}: holds a JSON {type(hf).__name__}, not an object of settings; {RESTORE}")
    return hf


def model_config(directory: Path, hf: dict) -> ModelConfig:
    """The config `hf` (read from `directory`/config.json) describes, its keys checked first."""
    path = Path(directory) / "config.json"
    _check_types(path, hf, "")
    if isinstance(hf.get("text_config"), dict):
        _check_types(path, hf["text_config"], "text_config.")
    try:
        return from_hf(hf)
    except KeyError as error:
        key = error.args[0] if error.args else "?"
        raise BadModelFiles(f"{path}: no key {key!r}, which a {hf.get('model_type')!r} config needs; "
                            f"{RESTORE}") from None
    except WeightMismatch:
        raise
    except UnsupportedModel as error:
        raise BadModelFiles(f"{path}: {error}") from None
    except (TypeError, ValueError, AttributeError, ZeroDivisionError) as error:
        raise BadModelFiles(f"{path}: a value is not what the config needs ({type(error).__name__}: {error}); "
                            f"{RESTORE}") from None


def _check_types(path: Path, hf: dict, prefix: str) -> None:
    model_type = hf.get("model_type")
    if prefix == "" and not isinstance(model_type, str):
        raise BadModelFiles(f"{path}: 'model_type' is {model_type!r}, not the name of an architecture (e.g. "
                            f"\"llama\"); {RESTORE}")
    for key in _COUNTS:
        value = hf.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise BadModelFiles(f"{path}: '{prefix}{key}' is {json.dumps(value)}, not a positive integer; {RESTORE}")
    for key in _NUMBERS:
        value = hf.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise BadModelFiles(f"{path}: '{prefix}{key}' is {json.dumps(value)}, not a positive number; {RESTORE}")


@contextlib.contextmanager
def naming_files(location: Path) -> Iterator[None]:
    """Turn a `WeightMismatch` raised while a stack is built from `location` (a snapshot folder or a GGUF file)
    into BadModelFiles naming the file that holds the tensor (or, for a missing one, where it was looked for)."""
    try:
        yield
    except WeightMismatch as error:
        where = location if Path(location).is_file() else _holder(Path(location), error.tensor)
        raise BadModelFiles(f"{where}: {error}: the weights do not match config.json; download the model again, "
                            "or restore the config.json that came with these weights") from None


def location_of(name: str) -> Path:
    """The GGUF file or the snapshot folder a model name resolves to."""
    source = registry.resolve(name)
    return source.gguf or registry.snapshot_directory(source)


def _holder(directory: Path, tensor: str) -> str:
    """The safetensors file of `directory` holding `tensor`; else the files it was looked for in."""
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    for file in files:
        with safe_open(str(file), "pt") as reader:
            if tensor in reader.keys():
                return str(file)
    return str(files[0]) if len(files) == 1 else f"{directory}/*.safetensors"
