"""bookkit.hfconfigs: the tiny configurations chapters 22 and 23 measure."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from bookkit.hfconfigs import tiny_gpt2, tiny_llama  # noqa: E402


def test_tiny_gpt2_defaults_and_overrides():
    config = tiny_gpt2()
    assert (config.n_layer, config.n_embd, config.n_head) == (2, 64, 4)
    assert (config.vocab_size, config.n_positions) == (500, 128)
    assert config.attn_pdrop == config.resid_pdrop == config.embd_pdrop == 0.1
    assert config._attn_implementation == "eager"
    other = tiny_gpt2("sdpa", dropout=0.0, n_layer=3)
    assert other.n_layer == 3 and other.attn_pdrop == 0.0
    assert other._attn_implementation == "sdpa"


def test_tiny_llama_defaults_and_overrides():
    config = tiny_llama()
    assert (config.num_hidden_layers, config.hidden_size) == (2, 64)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert (config.intermediate_size, config.vocab_size) == (96, 500)
    assert config.max_position_embeddings == 256 and config.attention_dropout == 0.0
    assert config._attn_implementation == "sdpa"
    other = tiny_llama("eager", dropout=0.1, num_hidden_layers=4)
    assert other.num_hidden_layers == 4 and other.attention_dropout == 0.1
    assert other._attn_implementation == "eager"


def test_each_call_builds_a_fresh_config():
    a, b = tiny_gpt2(), tiny_gpt2()
    a._attn_implementation = "sdpa"
    assert b._attn_implementation == "eager"
