"""Small models whose step is a DAG, not a chain (shown in "Beyond chains").

`gpt_stack` is a stack of pre-LayerNorm transformer blocks (two residual adds and
attention's fan-out per block); `tiny_unet` is an MLP U-Net whose decoder adds the
encoder's outputs back (skip connections). Each is a `GraphModel`: its chain view
(``layers``, called one after the other, what the chain planners see), the input, the
target and a ``step`` that runs forward and loss and returns the loss, the function
``minigrad.plan.trace_graph`` and ``minigrad.remat.run`` take.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import minigrad.ops as F
from minigrad import Tensor, nn, random

__all__ = ["GraphModel", "gpt_stack", "tiny_unet", "UNet", "Residual"]


@dataclass
class GraphModel:
    """A model, its chain view and one training step (see the module docstring)."""

    name: str
    layers: list
    x: Tensor
    target: Tensor

    def loss(self, h):
        return F.mse_loss(h, self.target)

    def step(self, x):
        """Forward and loss: ``loss = mse(layers(x), target)``."""
        h = x
        for layer in self.layers:
            h = layer(h)
        return self.loss(h)

    def parameters(self) -> list:
        return [p for layer in self.layers for p in layer.parameters()]

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None


class Residual(nn.Module):
    """``x + fn(norm(x))``: one half of a pre-LayerNorm transformer block."""

    def __init__(self, norm, fn):
        self.norm, self.fn = norm, fn

    def forward(self, x):
        return x + self.fn(self.norm(x))


def gpt_stack(n_blocks: int = 2, d_model: int = 16, n_heads: int = 2, seq_len: int = 8,
              batch: int = 1, seed: int = 0, sublayers: bool = False) -> GraphModel:
    """``n_blocks`` `minigrad.nn.TransformerBlock` on a (batch, seq_len, d_model) input.

    The chain view has one layer per block, or with ``sublayers=True`` two: the
    attention half and the MLP half, each ``x + f(norm(x))`` (the same ops in the same
    order as the block).

    Example:
        >>> m = gpt_stack(1); m.step(m.x).backward()
    """
    random.manual_seed(seed)
    blocks = [nn.TransformerBlock(d_model, n_heads) for _ in range(n_blocks)]
    layers = blocks if not sublayers else [
        half for b in blocks for half in (Residual(b.ln1, b.attn), Residual(b.ln2, b.mlp))]
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((batch, seq_len, d_model)).astype(np.float32))
    target = Tensor(rng.standard_normal((batch, seq_len, d_model)).astype(np.float32))
    return GraphModel(f"GPT, {n_blocks} block" + ("s" if n_blocks > 1 else ""), layers, x, target)


class UNet(nn.Module):
    """An MLP U-Net: encoder ``Linear -> tanh`` to narrower widths, decoder back up, each
    decoder level adding the encoder output of the same width (a skip connection).

    Example:
        >>> UNet((32, 16, 8))(Tensor(np.ones((4, 32), np.float32))).shape
        (4, 32)
    """

    def __init__(self, widths=(32, 16, 8)):
        widths = tuple(int(w) for w in widths)
        self.widths = widths
        self.down = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths, widths[1:])])
        self.up = nn.ModuleList([nn.Linear(b, a) for a, b in zip(widths, widths[1:])])
        self.head = nn.Linear(widths[0], widths[0])

    def forward(self, x):
        skips = []
        h = x
        for lin in self.down:
            skips.append(h)
            h = lin(h).tanh()
        for lin, skip in zip(reversed(list(self.up)), reversed(skips)):
            h = lin(h).tanh() + skip  # the skip connection
        return self.head(h)


def tiny_unet(widths=(32, 16, 8), batch: int = 16, seed: int = 0) -> GraphModel:
    """A `UNet` on a (batch, widths[0]) input; its chain view is the whole U-Net as one
    layer, since no cut between its modules carries a single tensor.

    Example:
        >>> m = tiny_unet(); m.step(m.x).backward()
    """
    random.manual_seed(seed)
    model = UNet(widths)
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((batch, widths[0])).astype(np.float32))
    target = Tensor(rng.standard_normal((batch, widths[0])).astype(np.float32))
    return GraphModel(f"U-Net {'-'.join(map(str, widths))}", [model], x, target)
