"""Tiny GPT-2 and Llama configurations, for measuring the memory calculator.

Chapters 22 and 23 build their models from these (with
`bookkit.calculator.build_model`): two layers, 64 features and 4 heads unless
overridden, random weights, a training step in milliseconds on a CPU, and the same
code paths (attention implementations, dropout, checkpointing) as the released models.
"""
from __future__ import annotations

__all__ = ["tiny_gpt2", "tiny_llama"]


def tiny_gpt2(attn: str = "eager", dropout: float = 0.1, **kw):
    """A small ``GPT2Config``: 2 layers, 64 features, 4 heads, a 500-token vocabulary
    and 128 positions.

    Args:
        attn: the attention implementation (``"eager"``, ``"sdpa"``).
        dropout: the three dropout probabilities (embeddings, attention, residual).
        **kw: any other field of ``GPT2Config``, overriding the above.

    Example:
        >>> from bookkit.hfconfigs import tiny_gpt2
        >>> config = tiny_gpt2(n_layer=4)
        >>> config.n_layer, config.n_embd, config.attn_pdrop, config._attn_implementation
        (4, 64, 0.1, 'eager')
    """
    from transformers import GPT2Config

    base = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=128,
                attn_pdrop=dropout, resid_pdrop=dropout, embd_pdrop=dropout)
    config = GPT2Config(**{**base, **kw})
    config._attn_implementation = attn
    return config


def tiny_llama(attn: str = "sdpa", dropout: float = 0.0, **kw):
    """A small ``LlamaConfig`` with grouped-query attention: 2 layers, 64 features,
    4 heads (2 for K and V), an MLP of 96, a 500-token vocabulary, 256 positions.

    Args:
        attn: the attention implementation (``"sdpa"``, ``"eager"``).
        dropout: the attention dropout probability.
        **kw: any other field of ``LlamaConfig``, overriding the above.

    Example:
        >>> from bookkit.hfconfigs import tiny_llama
        >>> config = tiny_llama("eager", vocab_size=300)
        >>> config.num_key_value_heads, config.vocab_size, config._attn_implementation
        (2, 300, 'eager')
    """
    from transformers import LlamaConfig

    base = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=96, vocab_size=500,
                max_position_embeddings=256, attention_dropout=dropout)
    config = LlamaConfig(**{**base, **kw})
    config._attn_implementation = attn
    return config
