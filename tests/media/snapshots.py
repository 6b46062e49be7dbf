"""Tiny random-weight multimodal snapshots (real architectures, small shapes) with a byte-level tokenizer that has
the models' media tokens, saved as a Hugging Face snapshot directory: what the media tests load through spinfc's
loader and compare with transformers on."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import torch

VOCAB = 300
SPECIALS = ["<pad>", "<bos>", "<eos>", "<start_of_image>", "<end_of_image>", "<image_soft_token>",
            "<video_soft_token>", "<start_of_audio>", "<end_of_audio>", "<audio_soft_token>"]


def byte_tokenizer(directory: Path, specials=SPECIALS, bos: str | None = "<bos>", **named):
    """A byte-level BPE tokenizer without merges: ids 0..255 are the bytes, then the special tokens (Gemma's
    names, or `specials`), a BOS before every encoding (none where `bos` is None); `named`: the special tokens'
    attributes (Gemma's by default)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(specials))
    if bos is not None:
        core.post_processor = processors.TemplateProcessing(single=f"{bos} $A",
                                                            special_tokens=[(bos, core.token_to_id(bos))])
    named = named or dict(bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", boi_token="<start_of_image>",
                          eoi_token="<end_of_image>", image_token="<image_soft_token>")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, **named)
    tokenizer.save_pretrained(str(directory))
    return tokenizer


def gemma3_snapshot(directory: Path):
    """Gemma3ForConditionalGeneration of a tiny real-shaped config (SigLIP 2 layers at 28 x 28 pixels in 7 x 7
    patches, 4 soft tokens an image; a 3-layer text stack with sliding and global layers), random weights with
    norms randomized, saved with its tokenizer in `directory`. Returns (transformers' model, tokenizer)."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_tokenizer(directory)
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIALS}
    config = Gemma3Config(
        text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                         sliding_window=64, query_pre_attn_scalar=24, rope_theta=20000.0,
                         rope_local_base_freq=300.0, pad_token_id=ids["<pad>"], bos_token_id=ids["<bos>"],
                         eos_token_id=ids["<eos>"],
                         layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
        vision_config=dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                           image_size=28, patch_size=7, vision_use_head=False),
        mm_tokens_per_image=4, boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
    )
    config.text_config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name and "vision" not in name:
                parameter.normal_(0.0, 0.3)
            elif "multi_modal_projector" in name:  # transformers initializes the projection to zeros
                parameter.normal_(0.0, 0.3)
    model.save_pretrained(directory)
    return model, tokenizer


def data_url(data: bytes, mime: str = "image/png") -> str:
    """`data` as a data URL, as a client sends a file in an `image_url` (or `video_url`) part."""
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def png(width: int, height: int, seed: int = 0, mode: str = "RGB") -> bytes:
    """A PNG of random pixels."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, format="PNG")
    return buffer.getvalue()


def mp4(frames: int, width: int = 24, height: int = 24) -> bytes:
    """An MP4 (MPEG-4 part 2, as PyAV's bundled FFmpeg encodes it) of `frames` random frames, 4 a second."""
    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=4)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for k in range(frames):
            pixels = np.random.default_rng(k).integers(0, 256, (height, width, 3), dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        container.mux(stream.encode())
    return buffer.getvalue()


def frames_of(video: bytes) -> list[bytes]:
    """The decoded frames of a video file, each as a PNG."""
    import av

    out = []
    with av.open(io.BytesIO(video)) as container:
        for frame in container.decode(container.streams.video[0]):
            buffer = io.BytesIO()
            frame.to_image().save(buffer, format="PNG")
            out.append(buffer.getvalue())
    return out


def gemma4_snapshot(directory: Path, variant: str = "gemma4-e2b"):
    """Gemma4ForConditionalGeneration: `variant`'s text stack (tests/runtime/gemma4_shapes.py; the E2B feature set by
    default: PLE, shared K/V, soft-capping) reading vision both ways, a 1-layer vision encoder (4-pixel patches
    pooled 3 x 3) and, on E2B (as on the published models, the small ones alone hear), a 1-layer audio conformer,
    random weights (norms and the embedders' projections randomized), saved with the byte tokenizer. Returns
    (transformers' model, tokenizer)."""
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    from tests.runtime.gemma4_shapes import gemma4_config, randomize

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_tokenizer(directory)
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIALS}
    text = gemma4_config(variant, vocab=VOCAB).to_dict()
    text.update(use_bidirectional_attention="vision", sliding_window=512, pad_token_id=ids["<pad>"],
                bos_token_id=ids["<bos>"], eos_token_id=ids["<eos>"])
    config = Gemma4Config(
        text_config=text,
        vision_config=dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=2, head_dim=16, patch_size=4, pooling_kernel_size=3,
                           position_embedding_size=256),
        audio_config=(dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, output_proj_dims=48)
                      if variant == "gemma4-e2b" else None),
        boi_token_id=ids["<start_of_image>"], eoi_token_id=ids["<end_of_image>"],
        image_token_id=ids["<image_soft_token>"], video_token_id=ids["<video_soft_token>"],
        boa_token_id=ids["<start_of_audio>"], eoa_token_index=ids["<end_of_audio>"],
        audio_token_id=ids["<audio_soft_token>"],
    )
    for sub in (config, config.text_config, config.vision_config, config.audio_config):
        if sub is not None:
            sub._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Gemma4ForConditionalGeneration(config).eval()
    randomize(model.model.language_model)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embedding_projection" in name:
                parameter.normal_(0.0, 0.3)
    model.save_pretrained(directory)
    return model, tokenizer


def wav(seconds: float, rate: int = 16000, seed: int = 0) -> bytes:
    """A mono 16-bit WAV of noise."""
    import wave

    import numpy as np

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        noise = np.random.default_rng(seed).normal(0, 3000, int(seconds * rate)).clip(-32000, 32000)
        out.writeframes(noise.astype("<i2").tobytes())
    return buffer.getvalue()


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]


def qwen3_5_snapshot(directory: Path, seed: int = 0, moe: bool = False, text: dict | None = None):
    """Qwen3_5ForConditionalGeneration of a tiny real-shaped config: the text stack of tests/runtime/qwen3_5_random.py
    (three Gated DeltaNet layers to one gated full-attention layer) with heads of 32 (8 rotary dims: M-RoPE's
    sections 2, 1, 1 of Qwen3.5's 11, 11, 10 interleaved), a 2-block vision tower (4-pixel patches, merged 2 x 2 into
    the text width, a 4 x 4 learned position grid), random weights (norms, decays randomized as the text tests do),
    saved with a byte tokenizer holding Qwen's special tokens (no BOS) and a preprocessor_config.json for small
    images; with `moe`, Qwen3.5-MoE's (every MLP a sparse block, as tests/runtime/qwen3_5_random.py scales it);
    `text`: other text-config values (wider heads). Returns (transformers' model, tokenizer)."""
    import json

    import transformers

    from tests.runtime.qwen3_5_random import MOE, SHAPE, randomize

    kind = "Qwen3_5Moe" if moe else "Qwen3_5"

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_tokenizer(directory, QWEN_SPECIALS, bos=None, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in QWEN_SPECIALS}
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1],
            "mrope_interleaved": True}
    text_config = {**SHAPE, "vocab_size": VOCAB, "head_dim": 32, "rope_parameters": rope,
                   "pad_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"], **(MOE if moe else {}),
                   **(text or {})}
    config = getattr(transformers, f"{kind}Config")(
        text_config=text_config,
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=2, patch_size=4,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=text_config["hidden_size"],
                           num_position_embeddings=16),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    for sub in (config, config.text_config, config.vision_config):
        sub._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, f"{kind}ForConditionalGeneration")(config).eval()
    with torch.no_grad():
        randomize(model.model.language_model.named_parameters())
    model.save_pretrained(directory)
    (directory / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen3VLProcessor",
        "size": {"shortest_edge": 8 * 8, "longest_edge": 48 * 48}, "patch_size": 4, "temporal_patch_size": 2,
        "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}))
    return model, tokenizer
