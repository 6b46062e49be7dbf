"""GGUF conversion: a random transformers model written as GGUF the way llama.cpp's converter writes it (gguf's
own tensor name map, llama's permuted q/k rows, Gemma's norms + 1) reads back as the same state dict and config;
the cached safetensors copy is reused, and renewed when the file changes."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import torch

from spinfc.runtime.models.families import from_hf
from spinfc.runtime.weights import load_gguf
from spinfc.runtime.weights.cache import cached_copy
from spinfc.runtime.weights.gguf_file import read_gguf

SHAPE = dict(
    vocab_size=80, hidden_size=32, intermediate_size=48, num_hidden_layers=6, num_attention_heads=4,
    num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
)


def _hf_model(family: str):
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, Qwen3Config

    config = {
        "llama": lambda: LlamaConfig(**SHAPE, tie_word_embeddings=False, rope_theta=5000.0),
        "qwen3": lambda: Qwen3Config(**SHAPE, tie_word_embeddings=True, rope_theta=7000.0),
        "gemma3": lambda: Gemma3TextConfig(**SHAPE, sliding_window=16, query_pre_attn_scalar=8, rope_theta=9000.0),
    }[family]()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.3)
    return model


def _llama_cpp_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py, LlamaModel.permute."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, 2, half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def write_gguf(model, family: str, path) -> dict[str, torch.Tensor]:
    """Write `model` as an F32 GGUF file; returns the state dict the file should read back as."""
    import gguf

    c = model.config
    arch = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen3": gguf.MODEL_ARCH.QWEN3, "gemma3": gguf.MODEL_ARCH.GEMMA3}[family]
    names = gguf.get_tensor_name_map(arch, c.num_hidden_layers)
    writer = gguf.GGUFWriter(str(path), family)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_key_length(c.head_dim)
    writer.add_value_length(c.head_dim)
    writer.add_rope_freq_base(c.rope_parameters.get("full_attention", c.rope_parameters)["rope_theta"])
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_vocab_size(c.vocab_size)
    if family == "gemma3":
        writer.add_sliding_window(c.sliding_window)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if not k.endswith("inv_freq")}
    if c.tie_word_embeddings:
        state.pop("lm_head.weight")
    for hf_name, tensor in state.items():
        data = tensor.numpy()
        if family == "llama" and hf_name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = c.num_attention_heads if "q_proj" in hf_name else c.num_key_value_heads
            data = _llama_cpp_permute(data, heads)
        if family == "gemma3" and hf_name.endswith("norm.weight"):
            data = data + np.float32(1.0)
        writer.add_tensor(names.get_name(hf_name, try_suffixes=(".weight",)), np.ascontiguousarray(data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return state


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_gguf_reads_back_as_the_hf_state_dict(family, tmp_path):
    model = _hf_model(family)
    want = write_gguf(model, family, tmp_path / "model.gguf")
    config, state = read_gguf(tmp_path / "model.gguf")
    expected = from_hf(model.config.to_dict())
    assert config.norm_eps == pytest.approx(expected.norm_eps, rel=1e-6)  # GGUF stores it as float32
    assert attrs.evolve(config, norm_eps=expected.norm_eps) == expected
    assert sorted(state) == sorted(want)
    for name, tensor in want.items():
        # Gemma's norms went through (w + 1) - 1 in float32: equal to within an ulp of 1.
        atol = 1e-7 if family == "gemma3" and "norm" in name else 0.0
        torch.testing.assert_close(state[name], tensor, atol=atol, rtol=0.0, msg=name)


def test_cached_copy_is_reused_and_renewed(tmp_path, monkeypatch):
    monkeypatch.setenv("SPINFC_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "model.gguf"
    write_gguf(_hf_model("qwen3"), "qwen3", path)
    config, state, sha256 = load_gguf(path)
    copy = cached_copy(path)
    assert copy.is_file()
    again = load_gguf(path)
    assert again[0] == config and again[2] == sha256
    assert all(torch.equal(again[1][name], tensor) for name, tensor in state.items())
    write_gguf(_hf_model("llama"), "llama", path)  # a new file at the same path: a new size and mtime
    renewed = load_gguf(path)
    assert cached_copy(path) != copy and renewed[0].family == "llama" and renewed[2] != sha256
