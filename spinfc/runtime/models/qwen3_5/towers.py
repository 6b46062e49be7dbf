"""Qwen3.5's vision tower: transformers' own `Qwen3_5VisionModel` (patch embed, learned positions resampled to the
image's grid, 2D vision rotary, blocks, the patch merger into the text width) on the snapshot's weights, and its
image processor (`Qwen2VLImageProcessorPil`: the aspect-preserving resize to multiples of patch x merge, patches,
`image_grid_thw`). As the chat template and Qwen3VLProcessor write it, an image is `<|vision_start|>` + one
`<|image_pad|>` per merged patch (grid_t * grid_h * grid_w / merge^2) + `<|vision_end|>`, read causally.

Its text stack turns rope by three positions (M-RoPE): an image's pads sit at (t, h, w) = (s, s + row, s + column)
of the merged grid, s the position after `<|vision_start|>`, and the text after the image continues from the max +
1 (`MediaRead.positions`, transformers' `get_rope_index`).

A video (video.py: frames sampled, resized to one grid, paired into temporal patches) is, per temporal patch,
its time as text (`<0.2 seconds>`) + `<|vision_start|>` + one `<|video_pad|>` per merged patch + `<|vision_end|>`.
transformers' `get_rope_index` splits a video's grid into one grid a temporal patch (t = 1), so each pair of frames
sits as an image does, from the position after its `<|vision_start|>`, and the time text counts on as text. The
tower reads a temporal patch as it reads an image (its attention is within a frame's patches), so the tower's
forward takes images and temporal patches alike, in fixed batches of one grid."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from spinfc.runtime.models.qwen3_5.config import MULTIMODAL
from spinfc.runtime.models.qwen3_5.video import VideoProcessing
from spinfc.runtime.towers import Towers, processor_config
from spinfc.runtime.towers.base import MediaRead, Tower, fixed_batches, prefixed

VISION = "model.visual."  # where a multimodal checkpoint keeps its vision tower's weights


def qwen3_5_towers(hf_config: dict, state: dict, directory, *, device="cpu", dtype=torch.float32,
                   load: bool = True) -> Towers | None:
    """Qwen3.5's vision tower (its weights under `model.visual.`; the text stack's names are its own to read), or
    None for a snapshot without one."""
    if hf_config.get("model_type") not in MULTIMODAL:
        return None
    if not load or not hf_config.get("vision_config") or not any(k.startswith(VISION) for k in state):
        for key in [k for k in state if k.startswith(VISION)]:
            del state[key]
        return None
    return Towers([Qwen3_5Vision(hf_config, state, processor_config(directory), device=device, dtype=dtype,
                                 video_config=processor_config(directory, "video_preprocessor_config.json"))])

# preprocessor_config.json keys the image processor takes (the rest name the processor's classes)
PROCESSOR_OPTIONS = ("size", "min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size",
                     "image_mean", "image_std", "rescale_factor", "do_normalize", "do_rescale", "do_resize",
                     "do_convert_rgb", "resample")


class Qwen3_5Vision(Tower):
    name = "qwen3_5-vision"
    kinds = frozenset({"image", "video"})

    def __init__(self, hf_config: dict, state: dict, processor_config: dict | None, *, device, dtype,
                 video_config: dict | None = None) -> None:
        """`hf_config`: the snapshot's config.json (Qwen3_5ForConditionalGeneration's, or the MoE's); `state`: its
        weights (the tower's, under `model.visual.`, are popped from it); `processor_config` and `video_config`:
        its preprocessor_config.json and video_preprocessor_config.json."""
        from transformers import AutoConfig, AutoModel
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        config = AutoConfig.for_model(**hf_config)
        v = config.vision_config
        v._attn_implementation = "eager"
        self.config, self.merge = config, v.spatial_merge_size
        vision = AutoModel.from_config(v)
        vision.load_state_dict(prefixed(state, "model.visual."), strict=True)
        self.vision = vision.to(device=device, dtype=dtype).eval()
        options = {"patch_size": v.patch_size, "temporal_patch_size": v.temporal_patch_size,
                   "merge_size": v.spatial_merge_size}
        options.update({k: value for k, value in (processor_config or {}).items() if k in PROCESSOR_OPTIONS})
        self.processor = Qwen2VLImageProcessorPil(**options)
        self.video = VideoProcessing(v, video_config)

    def read(self, kind, decoded, encode) -> MediaRead:
        if kind == "video":
            return self._read_video(decoded, encode)
        out = self.processor(images=[decoded], return_tensors="pt")
        grid = out["image_grid_thw"][0]  # [3]: t, h, w in patches
        t, h, w = (int(grid[0]), int(grid[1]) // self.merge, int(grid[2]) // self.merge)
        n, c = t * h * w, self.config
        tokens = (c.vision_start_token_id, *[c.image_token_id] * n, c.vision_end_token_id)
        return MediaRead("image", self.name, tokens, tuple(range(1, 1 + n)), (),
                         {"pixel_values": out["pixel_values"], "grid_thw": grid}, positions=image_positions(t, h, w))

    def _read_video(self, video, encode) -> MediaRead:
        """Each temporal patch as Qwen3VLProcessor writes it: its time, then an image's tokens and positions."""
        processed, c = self.video(video), self.config
        t, h, w = processed.grid[0], processed.grid[1] // self.merge, processed.grid[2] // self.merge
        tokens: list[int] = []
        embedded: list[int] = []
        positions: list[np.ndarray] = []
        for time in processed.times:
            stamp = encode(f"<{time:.1f} seconds>")
            at = positions[-1].max() + 1 if positions else 0
            positions.append(np.broadcast_to(np.arange(at, at + len(stamp)), (3, len(stamp))))
            positions.append(image_positions(1, h, w) + at + len(stamp))
            tokens.extend(stamp)
            embedded.extend(range(len(tokens) + 1, len(tokens) + 1 + h * w))
            tokens.extend((c.vision_start_token_id, *[c.video_token_id] * (h * w), c.vision_end_token_id))
        return MediaRead("video", self.name, tuple(tokens), tuple(embedded), (),
                         {"pixel_values": processed.pixels, "grid_thw": torch.tensor(processed.grid)},
                         positions=np.concatenate(positions, axis=1))

    @torch.inference_mode()
    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """The images and temporal patches of the pass through the tower in fixed batches of pieces of one grid
        (`fixed_batches`: a piece's shapes never depend on its neighbours): [sum of merged patches, D] in read
        order (a video's temporal patches in time order, as transformers' tower returns a (t, h, w) grid)."""
        dtype = self.vision.patch_embed.proj.weight.dtype
        pieces = []  # (pixels [h w, patch dim], grid (1, h, w)) of every image and temporal patch, in read order
        for read in reads:
            t, h, w = read.inputs["grid_thw"].tolist()
            pieces.extend((pixels, (1, h, w)) for pixels in read.inputs["pixel_values"].chunk(t))
        merged: list[torch.Tensor | None] = [None] * len(pieces)
        for grid in dict.fromkeys(g for _, g in pieces):
            mine = [i for i, (_, g) in enumerate(pieces) if g == grid]
            for batch, real in fixed_batches(mine):
                pixels = torch.cat([pieces[i][0] for i in batch]).to(device=device, dtype=dtype)
                grid_thw = torch.tensor([grid] * len(batch), device=device)
                out = self.vision(pixels, grid_thw=grid_thw).pooler_output  # [B * merged patches, D]
                for i, rows in zip(batch[:real], out.chunk(len(batch))):
                    merged[i] = rows
        return torch.cat(merged)


def image_positions(t: int, h: int, w: int) -> np.ndarray:
    """[3, 1 + t h w + 1] int64: the (t, h, w) offsets of `<|vision_start|>` (0), the image's pads (1 + their frame,
    row and column in the merged grid) and `<|vision_end|>` (1 + max(h, w), where the text after the image goes on:
    transformers' `get_vision_position_ids` for an image, t = 1)."""
    frames, rows, columns = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    pads = np.stack((frames, rows, columns)).reshape(3, -1) + 1
    end = np.full((3, 1), 1 + max(h, w))
    return np.concatenate((np.zeros((3, 1), np.int64), pads, end), axis=1).astype(np.int64)
