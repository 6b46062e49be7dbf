"""Qwen3.5's video processing: transformers' `Qwen3VLVideoProcessor` as its steps, on the frames spinfc's own PyAV
decoding gives (spinfc/media/decode.py). That processor resizes with torchvision, whose PyPI build is CUDA-linked
(it does not load beside the CPU torch); so the resize here is PIL's bicubic, as transformers' PIL image
processors do it, and every other step is the processor's own: its sampling rule, `smart_resize`, its rescale and
normalization, its `patchify`, and the prompt its Qwen3VLProcessor writes.

- Sampling: a video file is read at the processor's `fps` (2 frames a second): int(frames / rate * fps) frames,
  at least `min_frames` (4) and at most `max_frames` (768) and the file's frame count, spaced evenly over the file
  (`sample_frames`). A list of frames is read whole, as frames already sampled at that rate.
- Temporal patches: frames go in pairs (temporal_patch_size 2; an odd last frame is repeated), all resized to one
  grid (`smart_resize` over the frames' pixels: `size` bounds t x h x w).
- Prompt: each pair is `<{t:.1f} seconds>` (the mean of its two frames' times) + `<|vision_start|>` + one
  `<|video_pad|>` per merged patch + `<|vision_end|>` (Qwen3VLProcessor's `replace_video_token`, replacing the
  template's whole `<|vision_start|><|video_pad|><|vision_end|>` as Qwen's processor does)."""

from __future__ import annotations

import attrs
import numpy as np
import torch

# video_preprocessor_config.json keys the processing takes (the rest name the processor's classes)
VIDEO_OPTIONS = ("size", "patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std",
                 "rescale_factor", "fps", "min_frames", "max_frames")


@attrs.frozen
class ProcessedVideo:
    """`pixels`: [grid_t * grid_h * grid_w, 3 * temporal_patch_size * patch^2] (the processor's
    `pixel_values_videos`); `grid`: (grid_t, grid_h, grid_w) in patches (`video_grid_thw`); `times`: each temporal
    patch's time in seconds."""

    pixels: torch.Tensor
    grid: tuple[int, int, int]
    times: tuple[float, ...]


class VideoProcessing:
    def __init__(self, vision_config, options: dict | None) -> None:
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

        given = {"patch_size": vision_config.patch_size, "temporal_patch_size": vision_config.temporal_patch_size,
                 "merge_size": vision_config.spatial_merge_size}
        given.update({k: v for k, v in (options or {}).items() if k in VIDEO_OPTIONS})
        self.processor = Qwen3VLVideoProcessor(**given)  # its settings, defaults filled in (no torchvision needed)

    def __call__(self, video) -> ProcessedVideo:
        """A decoded `Video` -> its pixels, grid and temporal patch times."""
        from PIL import Image
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import smart_resize

        p = self.processor
        frames, times = self.sampled(video)
        pair, (width, height) = p.temporal_patch_size, frames[0].size
        h, w = smart_resize(max(len(frames), pair), height, width, temporal_factor=pair,
                            factor=p.patch_size * p.merge_size, min_pixels=p.size.shortest_edge,
                            max_pixels=p.size.longest_edge)
        frames += [frames[-1]] * (-len(frames) % pair)
        times += [times[-1]] * (-len(times) % pair)
        pixels = np.stack([np.asarray(frame.convert("RGB").resize((w, h), Image.Resampling.BICUBIC), np.float32)
                           for frame in frames])  # [T, h, w, 3]
        pixels = (pixels * np.float32(p.rescale_factor) - np.float32(p.image_mean)) / np.float32(p.image_std)
        videos = torch.from_numpy(np.ascontiguousarray(pixels.transpose(0, 3, 1, 2)))[None]  # [1, T, 3, h, w]
        patches, t, gh, gw = p.patchify(videos, patch_size=p.patch_size, merge_size=p.merge_size,
                                        temporal_patch_size=pair)
        middles = tuple((times[i] + times[i + pair - 1]) / 2 for i in range(0, len(times), pair))
        return ProcessedVideo(patches[0], (t, gh, gw), middles)

    def sampled(self, video) -> tuple[list, list[float]]:
        """The frames read and their times in seconds: a file's sampled at the processor's rate; a list whole."""
        p = self.processor
        if video.fps is None:
            return list(video.frames), [i / p.fps for i in range(len(video.frames))]
        total = len(video.frames)
        count = min(max(int(total / video.fps * p.fps), p.min_frames), p.max_frames, total)
        indices = np.linspace(0, total - 1, count).round().astype(int)
        return [video.frames[i] for i in indices], [i / video.fps for i in indices]
