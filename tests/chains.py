"""Building blocks of the random chains used by the property and exhaustive tests."""
from __future__ import annotations

from minigrad import nn

KINDS = ("linear", "relu", "gelu", "tanh", "layernorm", "dropout")


def make_layer(kind: str, width: int, out: int, p: float, dtype):
    """One layer of a chain and the width after it: ``Linear(width, out)`` changes the
    width, the others keep it (``p`` is the dropout probability)."""
    if kind == "linear":
        return nn.Linear(width, out, dtype=dtype), out
    if kind == "layernorm":
        return nn.LayerNorm(width, dtype=dtype), width
    if kind == "dropout":
        return nn.Dropout(p), width
    simple = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}
    if kind not in simple:
        raise ValueError(f"unknown layer kind {kind!r}; expected one of {KINDS}")
    return simple[kind](), width
