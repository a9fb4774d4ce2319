"""Building blocks of the random chains used by the property and exhaustive tests."""
from __future__ import annotations

import numpy as np

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


def segmentations(n: int):
    """Every one-level plan of an ``n``-layer chain, as its segment starts: the
    ``2^(n-1)`` subsets of ``1..n-1`` after the leading 0 (the brute force the planners
    are checked against). Example: ``list(segmentations(3))`` is
    ``[(0,), (0, 1), (0, 2), (0, 1, 2)]``."""
    if n < 1:
        raise ValueError(f"a chain has at least one layer, got n={n}")
    for mask in range(2 ** (n - 1)):
        yield (0,) + tuple(i for i in range(1, n) if mask >> (i - 1) & 1)


def random_chain(rng, n, dtype=np.float32):
    """n layers mixing Linear (random widths), ReLU, GELU, Tanh, LayerNorm and Dropout."""
    layers, width = [], int(rng.integers(2, 12))
    first_width = width
    for i in range(n):
        kind = "linear" if i == 0 else rng.choice(list(KINDS))
        # draw in the same order as before: the output width only for a Linear,
        # the dropout probability only for a Dropout
        out = int(rng.integers(2, 12)) if kind == "linear" else width
        p = float(rng.uniform(0.1, 0.6)) if kind == "dropout" else 0.0
        layer, width = make_layer(kind, width, out, p, dtype)
        layers.append(layer)
    return layers, first_width
