"""Modules, as in ``torch.nn``: parameters, buffers, train/eval, layers and a small GPT.

Shapes follow PyTorch: ``Linear.weight`` is (out, in); sequences are
(batch, seq, d_model). Initialisation draws from `minigrad.random`, so
``minigrad.random.manual_seed(0)`` makes a model reproducible. Parameters and
buffers tell the memory ledger their role (``"parameters"``, ``"buffers"``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from minigrad import ops as F
from minigrad import random as _random
from minigrad._validation import check_int, check_number
from minigrad.autograd import increment_version
from minigrad.checkpoint import checkpoint, is_recomputing
from minigrad.checkpoint import checkpoint_sequential
from minigrad.hooks import hold_role, is_dry_run, release_role
from minigrad.tensor import Tensor

__all__ = ["Parameter", "Module", "Linear", "ReLU", "GELU", "Tanh", "Dropout", "LayerNorm",
           "BatchNorm1d", "Embedding", "Sequential", "ModuleList", "CausalSelfAttention", "MLP",
           "TransformerBlock", "GPTConfig", "GPT"]


class Parameter(Tensor):
    """A leaf tensor that requires grad and is counted as ``"parameters"`` by the ledger.

    Args:
        data: an array (or nested numbers) for the initial value.
        dtype: optional dtype.

    Example:
        >>> w = Parameter(np.zeros((3, 4)))
        >>> w.requires_grad
        True
    """

    __slots__ = ()

    def __init__(self, data, dtype=None):
        super().__init__(data, requires_grad=True, dtype=dtype)
        hold_role(self._data, "parameters")

    @property
    def data(self):
        return self._data

    @data.setter
    def data(self, value):
        if value is self._data:  # in-place update (p.data -= ...): same array, same role
            self._version_counter += 1
            return
        old = self._data
        if np.shape(value) != old.shape:
            raise ValueError(f"Parameter.data: new shape {np.shape(value)} != {old.shape}")
        Tensor.data.fset(self, value)
        release_role(old, "parameters")
        hold_role(self._data, "parameters")


class Module:
    """Base class of layers (``torch.nn.Module``).

    Subclasses set Parameters, Modules and buffers as attributes and define ``forward``;
    ``parameters()`` lists them in definition order; ``train()``/``eval()`` set ``training``
    on every submodule; ``state_dict``/``load_state_dict`` use torch's names and order.

    Example:
        >>> class Affine(Module):
        ...     def __init__(self):
        ...         self.w = Parameter(np.ones(3))
        ...     def forward(self, x):
        ...         return x * self.w
    """

    training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # --- traversal -------------------------------------------------------------------
    def named_children(self):
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value

    def children(self):
        return [m for _, m in self.named_children()]

    def modules(self):
        out = [self]
        for _, m in self.named_children():
            out.extend(m.modules())
        return out

    def named_parameters(self, prefix: str = ""):
        seen = set()
        for name, value in vars(self).items():
            if isinstance(value, Parameter) and id(value) not in seen:
                seen.add(id(value))
                yield prefix + name, value
            elif isinstance(value, Module):
                for n, p in value.named_parameters(prefix + name + "."):
                    if id(p) not in seen:
                        seen.add(id(p))
                        yield n, p

    def parameters(self) -> list:
        return [p for _, p in self.named_parameters()]

    def register_buffer(self, name: str, value):
        """Keep ``value`` (Tensor or array) as state that is not a parameter (counted as ``"buffers"``)."""
        t = value if isinstance(value, Tensor) else Tensor(np.asarray(value))
        hold_role(t.data, "buffers")
        self.__dict__.setdefault("_buffer_names", [])
        if name not in self._buffer_names:
            self._buffer_names.append(name)
        setattr(self, name, t)

    def named_buffers(self, prefix: str = ""):
        for name in self.__dict__.get("_buffer_names", []):
            yield prefix + name, getattr(self, name)
        for name, m in self.named_children():
            yield from m.named_buffers(prefix + name + ".")

    def buffers(self) -> list:
        return [b for _, b in self.named_buffers()]

    def state_dict(self, prefix: str = "") -> dict:
        """Name -> copy of the array, in torch's order and naming: each module's own
        parameters, then its buffers, then its children's (``"0.weight"``, ``"1.running_mean"``)."""
        d = {}
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                d[prefix + name] = value.data.copy()
        for name in self.__dict__.get("_buffer_names", []):
            d[prefix + name] = getattr(self, name).data.copy()
        for name, m in self.named_children():
            d.update(m.state_dict(prefix + name + "."))
        return d

    def load_state_dict(self, state: dict) -> None:
        """Copy arrays (NumPy, or anything with ``.numpy()``/``__array__``) into the parameters and buffers in place."""
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = set(own) - set(state)
        extra = set(state) - set(own)
        if missing or extra:
            raise KeyError(f"load_state_dict: missing {sorted(missing)}, unexpected {sorted(extra)}")
        for name, t in own.items():
            v = state[name]
            v = np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
            if v.shape != t.shape:
                raise ValueError(f"load_state_dict: {name} has shape {t.shape}, got {v.shape}")
            t.data[...] = v
            increment_version(t)  # a write the data setter does not see (torch: copy_)

    # --- modes ---------------------------------------------------------------------------
    def train(self, mode: bool = True):
        for m in self.modules():
            m.training = mode
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def __repr__(self):
        kids = "".join(f"\n  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self.named_children())
        return f"{type(self).__name__}({self.extra_repr()}{kids}{chr(10) if kids else ''})"

    def extra_repr(self) -> str:
        return ""


# --- layers ---------------------------------------------------------------------------
class Linear(Module):
    """``y = x @ weight.T + bias``: x (..., in) -> (..., out), initialised like torch
    (weight and bias uniform in ``[-1/sqrt(in), 1/sqrt(in))``).

    Args:
        in_features, out_features: positive integers.
        bias: whether to add a bias.
        dtype: float32 (default) or float64.

    Raises:
        TypeError, ValueError: sizes that are not positive integers (named).

    Example:
        >>> Linear(4, 2)(Tensor(np.ones((3, 4), np.float32))).shape
        (3, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32):
        in_features = check_int("in_features", in_features, 1, where="Linear")
        out_features = check_int("out_features", out_features, 1, where="Linear")
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(_random.uniform(-bound, bound, (out_features, in_features), dtype))
        self.bias = Parameter(_random.uniform(-bound, bound, (out_features,), dtype)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    """``max(x, 0)`` (see ``minigrad.ops.relu``).

    Example:
        >>> ReLU()(Tensor([-1.0, 2.0]))
        Tensor([0. 2.], dtype=float32)
    """
    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    """GELU, tanh approximation (torch: ``nn.GELU(approximate="tanh")``).

    Example:
        >>> GELU()(Tensor([-1.0, 2.0]))
        Tensor([-0.1588  1.9546], dtype=float32)
    """

    def forward(self, x):
        return F.gelu(x)


class Tanh(Module):
    """``tanh(x)`` (see ``minigrad.ops.tanh``).

    Example:
        >>> Tanh()(Tensor([-1.0, 2.0]))
        Tensor([-0.7616  0.964 ], dtype=float32)
    """
    def forward(self, x):
        return F.tanh(x)


class Dropout(Module):
    """Zero elements with probability ``p`` in training (masks from `minigrad.random`).

    Args:
        p: drop probability in [0, 1).

    Raises:
        ValueError: ``p`` outside [0, 1).

    Example:
        >>> y = Dropout(0.5)(Tensor(np.ones(1000)))   # training mode: zeros and 2s
        >>> sorted(set(y.data.tolist()))
        [0.0, 2.0]
    """

    def __init__(self, p: float = 0.5):
        self.p = check_number("p", p, 0.0, 1.0, where="Dropout", hi_open=True)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class LayerNorm(Module):
    """Normalise over the last dimension (size ``normalized_shape``), then scale and shift.

    Args:
        normalized_shape: the size of the last dimension (a positive integer).
        eps: added to the variance.
        elementwise_affine: learn a weight and a bias.
        dtype: float32 (default) or float64.

    Example:
        >>> LayerNorm(8)(Tensor(np.ones((2, 8), np.float32))).shape
        (2, 8)
    """

    def __init__(self, normalized_shape: int, eps: float = 1e-5, elementwise_affine: bool = True,
                 dtype=np.float32):
        self.normalized_shape = check_int("normalized_shape", normalized_shape, 1, where="LayerNorm")
        self.eps = check_number("eps", eps, 0.0, where="LayerNorm")
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype)) if elementwise_affine else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"({self.normalized_shape},), eps={self.eps}"


class BatchNorm1d(Module):
    """Batch normalisation of (N, C) or (N, C, L) with running statistics (buffers).

    In training the running mean/variance are updated in place at every forward.
    Under checkpointing a recomputation would update them a second time (torch
    does); by default minigrad skips the update while
    ``minigrad.checkpoint.is_recomputing()`` is True. ``update_stats_on_recompute=True``
    restores torch's behaviour ("When recomputation lies" shows the difference).

    Args:
        num_features: C.
        eps, momentum: as in torch.
        affine: learn a weight and a bias.
        update_stats_on_recompute: see above.
        dtype: float32 (default) or float64.

    Example:
        >>> BatchNorm1d(3)(Tensor(np.random.rand(8, 3).astype(np.float32))).shape
        (8, 3)
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, update_stats_on_recompute: bool = False, dtype=np.float32):
        self.num_features = check_int("num_features", num_features, 1, where="BatchNorm1d")
        self.eps = check_number("eps", eps, 0.0, where="BatchNorm1d")
        self.momentum = check_number("momentum", momentum, 0.0, 1.0, where="BatchNorm1d")
        self.update_stats_on_recompute = update_stats_on_recompute
        self.weight = Parameter(np.ones(num_features, dtype)) if affine else None
        self.bias = Parameter(np.zeros(num_features, dtype)) if affine else None
        self.register_buffer("running_mean", np.zeros(num_features, dtype))
        self.register_buffer("running_var", np.ones(num_features, dtype))
        self.num_batches_tracked = 0

    def forward(self, x):
        update = (self.training and not is_dry_run()
                  and (self.update_stats_on_recompute or not is_recomputing()))
        if update:
            self.num_batches_tracked += 1
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=self.training, momentum=self.momentum, eps=self.eps,
                            update_stats=update)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim`` (initialised N(0, 1), as torch).

    Example:
        >>> Embedding(10, 4)(np.array([[1, 2]])).shape
        (1, 2, 4)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype=np.float32):
        self.num_embeddings = check_int("num_embeddings", num_embeddings, 1, where="Embedding")
        self.embedding_dim = check_int("embedding_dim", embedding_dim, 1, where="Embedding")
        self.weight = Parameter(_random.default_generator.normal(0.0, 1.0, (num_embeddings, embedding_dim), dtype))

    def forward(self, idx):
        return F.embedding(idx, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Sequential(Module):
    """A chain of modules: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Indexable (an int gives a module, a slice a Sequential), ``len()`` and iteration over
    the layers; ``checkpoint_sequential`` accepts it as a list of layers.

    Example:
        >>> model = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
        >>> len(model), model[0]
        (3, Linear(in_features=4, out_features=8, bias=True))
    """

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, m in enumerate(layers):
            if not callable(m):
                raise TypeError(f"Sequential: layer {i} is not callable ({type(m).__name__})")
            setattr(self, str(i), m)
        self._n = len(layers)

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(*[getattr(self, str(j)) for j in range(self._n)[i]])
        if not -self._n <= i < self._n:
            raise IndexError(f"Sequential index {i} out of range for {self._n} layers")
        return getattr(self, str(i % self._n))

    def __iter__(self):
        return (getattr(self, str(j)) for j in range(self._n))

    def forward(self, x):
        for layer in self:
            x = layer(x)
        return x


class ModuleList(Sequential):
    """A list of modules (indexable, iterable); it has no forward of its own.

    Example:
        >>> blocks = ModuleList(*[Linear(4, 4) for _ in range(3)])
    """

    def forward(self, x):
        raise TypeError("ModuleList has no forward; iterate over it")


# --- transformer ------------------------------------------------------------------------
class CausalSelfAttention(Module):
    """Multi-head causal self-attention, (batch, seq, d_model) -> same.

    One ``qkv`` Linear(d, 3d) whose output is viewed as (b, s, 3, heads, d/heads) and
    permuted into q, k, v (views of one array), scaled dot-product attention with a
    causal mask, heads side by side again, then ``proj`` Linear(d, d) and dropout.

    Example:
        >>> CausalSelfAttention(8, 2)(Tensor(np.ones((1, 5, 8), np.float32))).shape
        (1, 5, 8)
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, dtype=np.float32):
        d_model = check_int("d_model", d_model, 1, where="CausalSelfAttention")
        n_heads = check_int("n_heads", n_heads, 1, where="CausalSelfAttention")
        if d_model % n_heads:
            raise ValueError(f"CausalSelfAttention: d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads = d_model, n_heads
        self.qkv = Linear(d_model, 3 * d_model, dtype=dtype)
        self.proj = Linear(d_model, d_model, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"CausalSelfAttention: expected input (batch, seq, {self.d_model}), "
                             f"got {tuple(x.shape)}")
        b, s, d = x.shape
        a = self.n_heads
        # (B, T, 3C) -> (B, T, 3, nh, hs) -> (3, B, nh, T, hs): q, k, v are views of one array
        # (one expression, so that no name keeps that array alive after attention)
        q, k, v = self.qkv(x).reshape(b, s, 3, a, d // a).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(b, s, d)  # (B, T, nh, hs) -> (B, T, C)
        return self.dropout(self.proj(y))


class MLP(Module):
    """Linear(d, 4d), GELU, Linear(4d, d), Dropout: (..., d) -> (..., d).

    Example:
        >>> MLP(8)(Tensor(np.ones((1, 5, 8), np.float32))).shape
        (1, 5, 8)
    """

    def __init__(self, d_model: int, dropout: float = 0.0, expansion: int = 4, dtype=np.float32):
        self.fc = Linear(d_model, expansion * d_model, dtype=dtype)
        self.act = GELU()
        self.proj = Linear(expansion * d_model, d_model, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.proj(self.act(self.fc(x))))


class TransformerBlock(Module):
    """Pre-LayerNorm block: ``x + attn(ln1(x))`` then ``h + mlp(ln2(h))``; (b, s, d) -> (b, s, d).

    Example:
        >>> TransformerBlock(8, 2)(Tensor(np.ones((1, 5, 8), np.float32))).shape
        (1, 5, 8)
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, dtype=np.float32):
        self.ln1 = LayerNorm(d_model, dtype=dtype)
        self.attn = CausalSelfAttention(d_model, n_heads, dropout, dtype=dtype)
        self.ln2 = LayerNorm(d_model, dtype=dtype)
        self.mlp = MLP(d_model, dropout, dtype=dtype)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


@dataclass(frozen=True)
class GPTConfig:
    """The sizes of a `GPT` (nanoGPT's ``GPTConfig``).

    Attributes:
        vocab_size: number of tokens.
        d_model: width of the residual stream.
        n_heads: attention heads (must divide ``d_model``).
        n_layers: transformer blocks.
        seq_len: the longest sequence (positions embedded).
        dropout: dropout probability after the embeddings, attention and MLP.
        checkpoint_blocks: False (store everything), True (each block in its own
            checkpoint), or anything ``checkpoint_sequential`` accepts as ``segments``.
        dtype: float32 or float64.

    Example:
        >>> config = GPTConfig(vocab_size=64, d_model=32, n_heads=4, n_layers=2, seq_len=16)
        >>> model = GPT(config)
    """

    vocab_size: int
    d_model: int
    n_heads: int
    n_layers: int
    seq_len: int
    dropout: float = 0.0
    checkpoint_blocks: object = False
    dtype: object = np.float32

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "seq_len"):
            check_int(name, getattr(self, name), 1, where="GPTConfig")
        check_number("dropout", self.dropout, 0.0, 1.0, where="GPTConfig", hi_open=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"GPTConfig: d_model={self.d_model} is not divisible by "
                             f"n_heads={self.n_heads}")
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            dtype = None
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"GPTConfig: dtype must be float32 or float64, got {self.dtype!r}")


class GPT(Module):
    """A small GPT: token + position embeddings, ``n_layers`` TransformerBlocks, a final
    LayerNorm and an unbiased ``head`` Linear(d_model, vocab_size) (no weight tying).

    Args:
        config: a `GPTConfig`; or give its fields as keywords (``GPT(vocab_size=64, ...)``),
            which also override a config's (``GPT(config, checkpoint_blocks=True)``).

    ``forward(idx)``: integer tokens (batch, seq) with seq <= ``seq_len`` -> logits
    (batch, seq, vocab_size). ``checkpoint_blocks`` (an attribute, from the config):
    False (store everything), True (each block in its own checkpoint, every block
    recomputed), or anything ``checkpoint_sequential`` accepts as ``segments`` (an int, a
    list of starts, a plan; its last segment is not checkpointed).

    Example:
        >>> model = GPT(GPTConfig(vocab_size=64, d_model=32, n_heads=4, n_layers=2, seq_len=16))
        >>> idx = np.arange(32).reshape(2, 16) % 64
        >>> model(idx).shape
        (2, 16, 64)
    """

    def __init__(self, config: GPTConfig | None = None, **overrides):
        if config is None:
            config = GPTConfig(**overrides)
        elif not isinstance(config, GPTConfig):
            raise TypeError(f"GPT: expected a GPTConfig (or its fields as keywords), got "
                            f"{type(config).__name__}")
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        self.config = config
        d, dtype = config.d_model, config.dtype
        self.vocab_size, self.d_model, self.seq_len = config.vocab_size, d, config.seq_len
        self.tok_emb = Embedding(config.vocab_size, d, dtype=dtype)
        self.pos_emb = Embedding(config.seq_len, d, dtype=dtype)
        self.drop = Dropout(config.dropout)
        self.blocks = ModuleList(*[TransformerBlock(d, config.n_heads, config.dropout, dtype=dtype)
                                   for _ in range(config.n_layers)])
        self.ln_f = LayerNorm(d, dtype=dtype)
        self.head = Linear(d, config.vocab_size, bias=False, dtype=dtype)
        self.checkpoint_blocks = config.checkpoint_blocks

    def forward(self, idx):
        ia = idx.data if isinstance(idx, Tensor) else np.asarray(idx)
        if ia.ndim != 2 or ia.shape[1] > self.seq_len:
            raise ValueError(f"GPT: expected tokens (batch, seq <= {self.seq_len}), got shape {ia.shape}")
        pos = np.arange(ia.shape[1])
        h = self.drop(self.tok_emb(ia) + self.pos_emb(pos))  # (b, s, d)
        cb = self.checkpoint_blocks
        if cb is True:
            for block in self.blocks:
                h = checkpoint(block, h)
        elif cb is False or cb is None:
            for block in self.blocks:
                h = block(h)
        else:
            h = checkpoint_sequential(list(self.blocks), cb, h)
        return self.head(self.ln_f(h))  # (b, s, vocab)

    def loss(self, idx, targets):
        """Mean next-token cross-entropy of ``forward(idx)`` against ``targets`` (batch, seq)."""
        return F.cross_entropy(self.forward(idx), targets)
