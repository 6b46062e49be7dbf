"""Read a Hugging Face snapshot directory: config.json and the safetensors files beside it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import torch

from spinfc.errors import BadModelFiles
from spinfc.runtime.models.families import spec_of
from spinfc.runtime.weights.config import ModelConfig
from spinfc.runtime.weights.folder import hf_config, model_config
from spinfc.whole_files import check_safetensors


def weight_files(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise BadModelFiles(f"{directory}: config.json but no *.safetensors file: spinfc loads safetensors weights "
                            "only; download the model's weights (or convert them with save_pretrained)")
    return files


def read_snapshot(directory: Path, towers: bool = False) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """The config and every tensor of the snapshot, in the dtype they were saved in; a multimodal checkpoint's
    tower weights only with `towers` (the loader hands them to `runtime.towers.towers_of`), each named as its family
    reads them (`FamilySpec.snapshot_weights`)."""
    from safetensors.torch import load_file

    config = model_config(directory, hf_config(directory))
    state: dict[str, torch.Tensor] = {}
    for file in weight_files(directory):
        check_safetensors(file)  # a truncated download: one located line, not the library's error
        state.update(load_file(str(file)))
    rename = spec_of(config).snapshot_weights
    return config, (rename(state, towers) if rename is not None else state)


_BLOB = re.compile(r"^[0-9a-f]{64}$")


def file_digest(path: Path) -> str:
    """sha256 of a file's contents. A file in the Hugging Face cache is a link to a blob named by its sha256,
    which is then used without reading the file again."""
    target = path.resolve()
    if path.is_symlink() and _BLOB.match(target.name):
        return target.name
    digest = hashlib.sha256()
    with open(target, "rb") as stream:
        while chunk := stream.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def snapshot_hash(directory: Path) -> str:
    """A hash of the snapshot's weights and config: changes when any of them changes."""
    digest = hashlib.sha256((directory / "config.json").read_bytes())
    for file in weight_files(directory):
        digest.update(f"{file.name}:{file_digest(file)}".encode())
    return digest.hexdigest()
