"""Gemma 4's towers: the vision encoder (images, and a video's frames) and the audio conformer, each with its
multimodal embedder into the text width; transformers' own modules on the snapshot's weights, and its processors
(the PIL image processor, `Gemma4AudioFeatureExtractor`). As Gemma4Processor writes them: an image is
`<boi>` + its soft tokens (as many as its aspect-preserving resize gives, at most `max_soft_tokens`) + `<eoi>`; a
video frame `mm:ss <boi>` + soft tokens + `<eoi>`, frames joined by a space, at one frame a second (a list of
frames carries no rate); a clip `<boa>` + one soft token per 40 ms + `<eoa>`. With
`use_bidirectional_attention="vision"` an image's or frame's soft tokens attend each other both ways; audio is
causal."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from spinfc.runtime.towers import Towers, multimodal_names, processor_config
from spinfc.runtime.towers.base import MediaRead, Tower, fixed_batches, prefixed


def gemma4_towers(hf_config: dict, state: dict, directory, *, device="cpu", dtype=torch.float32,
                  load: bool = True) -> Towers | None:
    """The vision and audio towers of a multimodal `gemma4` snapshot (None for a text one, or one without
    towers), their weights popped from `state` (`towers.multimodal_names`)."""
    if hf_config.get("model_type") != "gemma4" or not multimodal_names(state, load):
        return None
    towers = Gemma4Towers.build(hf_config, state, processor_config(directory), device=device, dtype=dtype)
    return Towers(towers, pad_token_id=hf_config.get("text_config", {}).get("pad_token_id", 0)) if towers else None

VIDEO_SOFT_TOKENS = 70  # Gemma4VideoProcessor's max_soft_tokens a frame


class Gemma4Towers:
    """Builds the towers a Gemma 4 snapshot has (vision, audio, or both)."""

    @staticmethod
    def build(hf_config: dict, state: dict, processor_config: dict | None, *, device, dtype) -> list[Tower]:
        from transformers import Gemma4Config

        config = Gemma4Config(**hf_config)
        towers: list[Tower] = []
        if config.vision_config is not None:
            towers.append(Gemma4Vision(config, state, processor_config, device=device, dtype=dtype))
        if config.audio_config is not None:
            towers.append(Gemma4Audio(config, state, device=device, dtype=dtype))
        return towers


def _modules(config, sub, state: dict, tower: str, embedder: str, device, dtype):
    from transformers import AutoModel
    from transformers.models.gemma4.modeling_gemma4 import Gemma4MultimodalEmbedder

    sub._attn_implementation = "eager"
    encoder, embed = AutoModel.from_config(sub), Gemma4MultimodalEmbedder(sub, config.text_config)
    encoder.load_state_dict(prefixed(state, f"model.{tower}."), strict=True)
    embed.load_state_dict(prefixed(state, f"model.{embedder}."), strict=True)
    return encoder.to(device=device, dtype=dtype).eval(), embed.to(device=device, dtype=dtype).eval()


class Gemma4Vision(Tower):
    name = "gemma4-vision"
    kinds = frozenset({"image", "video"})

    def __init__(self, config, state: dict, processor_config: dict | None, *, device, dtype) -> None:
        from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

        self.config, v = config, config.vision_config
        self.encoder, self.embedder = _modules(config, v, state, "vision_tower", "embed_vision", device, dtype)
        options = {"patch_size": v.patch_size, "pooling_kernel_size": v.pooling_kernel_size}
        options.update({k: v for k, v in (processor_config or {}).items()
                        if k in ("max_soft_tokens", "patch_size", "pooling_kernel_size", "resample")})
        self.images = Gemma4ImageProcessorPil(**options)
        self.frames = Gemma4ImageProcessorPil(**{**options, "max_soft_tokens": VIDEO_SOFT_TOKENS})
        self.bidirectional = config.text_config.use_bidirectional_attention == "vision"

    def read(self, kind, decoded, encode) -> MediaRead:
        c = self.config
        if kind == "image":
            out = self.images(images=[decoded], return_tensors="pt")
            n = int(out["num_soft_tokens_per_image"][0])
            tokens = (c.boi_token_id, *[c.image_token_id] * n, c.eoi_token_id)
            return MediaRead("image", self.name, tokens, tuple(range(1, 1 + n)),
                             ((1, 1 + n),) if self.bidirectional else (),
                             {"pixel_values": out["pixel_values"][0], "position_ids": out["image_position_ids"][0]})
        out = self.frames(images=list(decoded.frames), return_tensors="pt")
        tokens, embedded, blocks = [], [], []
        for i, n in enumerate(int(k) for k in out["num_soft_tokens_per_image"]):
            tokens.extend(encode(("" if i == 0 else " ") + f"{i // 60:02d}:{i % 60:02d} "))
            tokens.append(c.boi_token_id)
            first = len(tokens)
            tokens.extend([c.video_token_id] * n)
            embedded.extend(range(first, first + n))
            blocks.append((first, first + n))
            tokens.append(c.eoi_token_id)
        return MediaRead("video", self.name, tuple(tokens), tuple(embedded),
                         tuple(blocks) if self.bidirectional else (),
                         {"pixel_values": out["pixel_values"], "position_ids": out["image_position_ids"]})

    @torch.inference_mode()
    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """The images and frames of the pass through the encoder in fixed batches of pieces of one patch count
        (`fixed_batches`: a piece's shapes never depend on its neighbours), each piece's soft tokens through the
        embedder on their own: [soft tokens, D] in read order."""
        dtype = self.embedder.embedding_projection.weight.dtype
        pieces = []  # (pixels [patches, 3 p^2], positions [patches, 2]) of every image and frame, in read order
        for read in reads:
            p, q = read.inputs["pixel_values"], read.inputs["position_ids"]
            pieces.extend(zip(p, q) if p.dim() == 3 else [(p, q)])
        hidden: list[torch.Tensor | None] = [None] * len(pieces)
        for width in dict.fromkeys(p.shape[0] for p, _ in pieces):  # the processors' patch counts (images, frames)
            mine = [i for i, (p, _) in enumerate(pieces) if p.shape[0] == width]
            for batch, real in fixed_batches(mine):
                pixels = torch.stack([pieces[i][0] for i in batch]).to(device=device, dtype=dtype)
                positions = torch.stack([pieces[i][1] for i in batch]).to(device=device)
                out = self.encoder(pixel_values=pixels, pixel_position_ids=positions).last_hidden_state
                counts = [self._soft_tokens(pieces[i][1]) for i in batch]
                assert sum(counts) == len(out), f"the encoder kept {len(out)} soft tokens, not {sum(counts)}"
                for i, rows in zip(batch[:real], out.split(counts)):
                    hidden[i] = rows
        return torch.cat([self.embedder(inputs_embeds=rows[None])[0] for rows in hidden])

    def _soft_tokens(self, positions: torch.Tensor) -> int:
        """How many soft tokens the encoder keeps of a piece: its real patches (position not -1) per pooled cell."""
        k = self.config.vision_config.pooling_kernel_size
        return int((positions != -1).any(-1).sum()) // (k * k)


class Gemma4Audio(Tower):
    name = "gemma4-audio"
    kinds = frozenset({"audio"})

    def __init__(self, config, state: dict, *, device, dtype) -> None:
        from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor

        self.config = config
        self.encoder, self.embedder = _modules(config, config.audio_config, state, "audio_tower", "embed_audio",
                                               device, dtype)
        self.features = Gemma4AudioFeatureExtractor()

    def read(self, kind, decoded, encode) -> MediaRead:
        wave, rate = decoded
        wave = _resampled(wave, rate, self.features.sampling_rate)
        out = self.features([wave], sampling_rate=self.features.sampling_rate, return_tensors="pt")
        features, mask = out["input_features"][0], out["input_features_mask"][0]
        n = self._soft_tokens(features, mask)
        c = self.config
        tokens = (c.boa_token_id, *[c.audio_token_id] * n, c.eoa_token_index)
        return MediaRead("audio", self.name, tokens, tuple(range(1, 1 + n)), (),
                         {"input_features": features, "input_features_mask": mask})

    @torch.inference_mode()
    def _soft_tokens(self, features, mask) -> int:
        """How many soft tokens the encoder gives a clip (its output mask's count), run where the encoder is (the
        read's features are on the host: on CUDA they must move, as `embed` moves them)."""
        weight = self.embedder.embedding_projection.weight
        out = self.encoder(features[None].to(device=weight.device, dtype=weight.dtype), mask[None].to(weight.device))
        return int(out.attention_mask.sum())

    @torch.inference_mode()
    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """The clips one at a time (their lengths differ): [soft tokens, D] in read order."""
        dtype = self.embedder.embedding_projection.weight.dtype
        parts = []
        for read in reads:
            features = read.inputs["input_features"][None].to(device=device, dtype=dtype)
            mask = read.inputs["input_features_mask"][None].to(device=device)
            out = self.encoder(features, mask)
            parts.append(self.embedder(inputs_embeds=out.last_hidden_state)[out.attention_mask])
        return torch.cat(parts)


def _resampled(wave: np.ndarray, rate: int, target: int) -> np.ndarray:
    """The waveform at `target` Hz (linear interpolation; the clip is usually recorded at it already)."""
    if rate == target:
        return wave
    times = np.arange(int(len(wave) * target / rate)) * (rate / target)
    return np.interp(times, np.arange(len(wave)), wave).astype(np.float32)
