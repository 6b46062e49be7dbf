"""Gemma 3's vision tower: SigLIP and the multimodal projector (transformers' own modules, on the snapshot's
weights), and transformers' PIL image processor. An image is `\n\n<start_of_image>` + mm_tokens_per_image soft
tokens + `<end_of_image>\n\n`, as Gemma3Processor writes it; its soft tokens attend each other both ways (the
image block of Gemma 3's token-type mask)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spinfc.runtime.towers import Towers, multimodal_names, processor_config
from spinfc.runtime.towers.base import MediaRead, Tower, fixed_batches, prefixed


def gemma3_towers(hf_config: dict, state: dict, directory, *, device="cpu", dtype=torch.float32,
                  load: bool = True) -> Towers | None:
    """The vision tower of a multimodal `gemma3` snapshot (None for a text one), its weights popped from `state`
    and the text stack's renamed to a text checkpoint's (`towers.multimodal_names`)."""
    if hf_config.get("model_type") != "gemma3" or not multimodal_names(state, load):
        return None
    return Towers([Gemma3Vision(hf_config, state, processor_config(directory), device=device, dtype=dtype)])


class Gemma3Vision(Tower):
    name = "gemma3-vision"
    kinds = frozenset({"image"})

    def __init__(self, hf_config: dict, state: dict, processor_config: dict | None, *, device, dtype) -> None:
        """`hf_config`: the snapshot's config.json (Gemma3ForConditionalGeneration's); `state`: its weights (the
        tower's are popped from it)."""
        from transformers import AutoModel, Gemma3Config
        from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
        from transformers.models.gemma3.modeling_gemma3 import Gemma3MultiModalProjector

        config = Gemma3Config(**hf_config)
        config.vision_config._attn_implementation = "eager"
        self.config = config
        vision, projector = AutoModel.from_config(config.vision_config), Gemma3MultiModalProjector(config)
        vision.load_state_dict(prefixed(state, "model.vision_tower."), strict=True)
        projector.load_state_dict(prefixed(state, "model.multi_modal_projector."), strict=True)
        self.vision = vision.to(device=device, dtype=dtype).eval()
        self.projector = projector.to(device=device, dtype=dtype).eval()
        side = config.vision_config.image_size
        options = {"size": {"height": side, "width": side}, **(processor_config or {})}
        options = {k: v for k, v in options.items() if k in Gemma3ImageProcessorPil.valid_kwargs.__annotations__
                   or k in ("size", "resample", "image_mean", "image_std", "rescale_factor", "do_normalize",
                            "do_rescale", "do_resize", "do_convert_rgb")}
        self.processor = Gemma3ImageProcessorPil(**options)
        self.soft_tokens = config.mm_tokens_per_image

    def read(self, kind, image, encode) -> MediaRead:
        pixels = self.processor(images=[image], return_tensors="pt", do_pan_and_scan=False)["pixel_values"]
        newlines = encode("\n\n")
        c = self.config
        tokens = (*newlines, c.boi_token_index, *[c.image_token_index] * self.soft_tokens, c.eoi_token_index,
                  *newlines)
        first = len(newlines) + 1
        soft = tuple(range(first, first + self.soft_tokens))
        return MediaRead("image", self.name, tokens, soft, ((first, first + self.soft_tokens),),
                         {"pixel_values": pixels[0]})

    @torch.inference_mode()
    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """The images of the pass through SigLIP and the projector in fixed batches (`fixed_batches`: an image's
        shapes never depend on its neighbours): [images * mm_tokens_per_image, D]."""
        dtype = self.projector.mm_input_projection_weight.dtype
        parts = []
        for batch, real in fixed_batches(reads):
            pixels = torch.stack([read.inputs["pixel_values"] for read in batch]).to(device=device, dtype=dtype)
            hidden = self.vision(pixel_values=pixels).last_hidden_state  # [B, patches, Dv]
            parts.append(self.projector(hidden)[:real])  # [real, soft, D]
        return torch.cat(parts).reshape(-1, self.config.text_config.hidden_size)  # [images * soft, D]
