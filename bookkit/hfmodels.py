"""Small Hugging Face models built offline, for measuring what the library does.

``tiny_gpt2`` builds a GPT-2 with random weights from a configuration: no download,
the same code paths (attention, checkpointing hooks, ``from_pretrained``) as a real
checkpoint, and a forward and backward that take milliseconds on a CPU. Chapters 15
and 16 measure checkpointing on it.
"""
from __future__ import annotations

__all__ = ["tiny_gpt2"]


def tiny_gpt2(seed: int = 0, n_layer: int = 4, n_embd: int = 64, n_head: int = 4,
              vocab_size: int = 256, n_positions: int = 128, dropout: float = 0.1):
    """A ``GPT2LMHeadModel`` with random weights (seeded), in training mode.

    The defaults give a 4-layer model with 64 features, 4 heads and a 256-token
    vocabulary, 224,640 parameters. ``dropout`` (GPT-2's default, 0.1) applies to the
    embeddings, the attention probabilities and the residual branches, so the model
    behaves differently in training and evaluation mode, as a real one does; 0.0
    makes a training step deterministic (chapter 17 compares runs loss for loss).
    Shown in chapter 15.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, vocab_size=vocab_size,
                        n_positions=n_positions, bos_token_id=0, eos_token_id=0,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    return GPT2LMHeadModel(config)
