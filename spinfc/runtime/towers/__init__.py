"""A model's vision and audio towers (`Towers`), loaded from its snapshot beside the text stack, and the
`MediaReader` the read-media pass reads a content's media with.

    towers_of(hf_config, state, directory) -> Towers | None   pops the towers' weights out of `state` (each
                                                              family's own towers: runtime/models/families.py)
    MediaReader(towers, policy, tokenizer).read(source)   -> MediaRead (decoded, checked, processed)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from spinfc.media.decode import decode_audio, decode_image, decode_video
from spinfc.media.errors import MediaError
from spinfc.media.fetch import fetched
from spinfc.media.parts import MediaSource
from spinfc.media.policy import MediaPolicy
from spinfc.passes.tokenize import encode_text
from spinfc.runtime.models.families import towers_of
from spinfc.runtime.towers.base import MediaRead, Tower

# which models read each kind: what a refusal tells the user to serve instead
READERS = {"image": "Gemma 3 (4B and larger), Gemma 4 and Qwen3.5", "audio": "Gemma 4 E2B and E4B",
           "video": "Gemma 4 (as frames) and Qwen3.5"}
DECODERS = {"image": decode_image, "audio": decode_audio, "video": decode_video}
# a multimodal checkpoint's names (as saved: transformers 4's, and 5's in memory) -> the names the stacks and towers
# read: the language model's as a text-only checkpoint's, the towers' under model.<tower>.
NAMES = (("language_model.model.", "model."), ("model.language_model.", "model."),
         ("language_model.lm_head.", "lm_head."), ("vision_tower.vision_model.", "model.vision_tower."),
         ("model.vision_tower.vision_model.", "model.vision_tower."), ("vision_tower.", "model.vision_tower."),
         ("multi_modal_projector.", "model.multi_modal_projector."))
TOWER_PREFIXES = ("model.vision_tower.", "model.multi_modal_projector.", "model.audio_tower.", "model.embed_vision.",
                  "model.embed_audio.")


class Towers:
    """The towers of one model, by name; `kinds` is what they read together."""

    def __init__(self, towers: Sequence[Tower], pad_token_id: int = 0) -> None:
        self.by_name = {tower.name: tower for tower in towers}
        self.pad_token_id = pad_token_id  # what a media row's token is read as where a stack reads its id (PLE)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset().union(*(tower.kinds for tower in self.by_name.values()))

    def for_kind(self, kind: str) -> Tower | None:
        return next((t for t in self.by_name.values() if kind in t.kinds), None)

    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """Every read's embeddings in order ([M, D]): one batched forward per tower over the reads it made."""
        parts: list[torch.Tensor | None] = [None] * len(reads)
        for name, tower in self.by_name.items():
            mine = [i for i, read in enumerate(reads) if read.tower == name]
            if not mine:
                continue
            rows = tower.embed([reads[i] for i in mine], device)
            sizes = [len(reads[i].embedded) for i in mine]
            for i, chunk in zip(mine, rows.split(sizes)):
                parts[i] = chunk
        return torch.cat(parts)


def multimodal_names(state: dict, load: bool) -> bool:
    """A Gemma multimodal checkpoint's names made the text stack's and the towers' (`NAMES`); with `load` False
    (--no-media) the towers' weights are dropped. Whether there are towers to build."""
    for key in list(state):
        for old, new in NAMES:
            if key.startswith(old):
                state[new + key[len(old):]] = state.pop(key)
                break
    if not load:
        for key in [k for k in state if k.startswith(TOWER_PREFIXES)]:
            del state[key]
    return load


def processor_config(directory: Path | None, name: str = "preprocessor_config.json") -> dict | None:
    path = None if directory is None else Path(directory) / name
    if path is None or not path.exists():
        return None
    config = json.loads(path.read_text())
    return {k: v for k, v in config.items()
            if k not in ("image_processor_type", "video_processor_type", "processor_class")}


class MediaReader:
    """What the read-media pass reads media with: the model's towers, the server's policy, the model's tokenizer."""

    def __init__(self, towers: Towers | None, policy: MediaPolicy, tokenizer, model_name: str = "this model"):
        self.towers, self.policy, self.tokenizer, self.model_name = towers, policy, tokenizer, model_name

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds requests may send: on the server (--media) and read by the model."""
        return self.policy.kinds & (self.towers.kinds if self.towers is not None else frozenset())

    def encode(self, text: str) -> tuple[int, ...]:
        return encode_text(self.tokenizer, text)

    def read(self, source: MediaSource) -> MediaRead:
        kind = source.kind
        tower = self.towers.for_kind(kind) if self.towers is not None else None
        if tower is None:
            raise MediaError(f"{self.model_name} does not read {kind}: it has no {kind} tower",
                             code=f"{kind}_unsupported", param=source.param,
                             hint=f"send text only, or serve a model that reads {kind}: {READERS[kind]}")
        if kind not in self.policy.kinds:
            on = ", ".join(sorted(self.policy.kinds)) or "none"
            raise MediaError(f"this server does not read {kind} (--media {on})", code="media_disabled",
                             param=source.param, hint=f"send text only, or ask the operator to start the server "
                             f"with --media including {kind}")
        decoded = DECODERS[kind](fetched(source, self.policy), self.policy)
        return tower.read(kind, decoded, self.encode)


__all__ = ["MediaRead", "MediaReader", "READERS", "Tower", "Towers", "towers_of"]
