"""Tiny GPT-2 and Llama configurations for the calculator's tests (shared by
test_calculator*.py): two layers, hidden 64, four heads, unless overridden."""
from __future__ import annotations

import warnings

import pytest
from transformers import GPT2Config, LlamaConfig

from bookkit.calculator import estimate_training_memory, measure_training_memory

KEYS = ("parameters", "gradients", "optimizer", "activations", "logits", "total")


def gpt2(attn="sdpa", dropout=0.0, **kw):
    """A GPT-2 config; ``dropout`` sets all three dropout probabilities."""
    base = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=256,
                attn_pdrop=dropout, resid_pdrop=dropout, embd_pdrop=dropout)
    config = GPT2Config(**{**base, **kw})
    config._attn_implementation = attn
    return config


def llama(attn="sdpa", dropout=0.0, **kw):
    """A Llama config with grouped-query attention (two key/value heads)."""
    base = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=96, vocab_size=500, max_position_embeddings=256,
                attention_dropout=dropout)
    config = LlamaConfig(**{**base, **kw})
    config._attn_implementation = attn
    return config


def assert_exact(config, **kw):
    """The estimate equals one measured training step, key by key, to the byte."""
    est = estimate_training_memory(config, **kw)
    measured = measure_training_memory(config, **kw)
    assert {k: est[k] for k in KEYS} == measured, (config.to_diff_dict(), kw, est["terms"])
    assert sum(est["terms"].values()) == est["activations"]


@pytest.fixture(autouse=True)
def quiet_rename_warning():
    """transformers warns (FutureWarning) that gradient_checkpointing_enable is renamed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield
