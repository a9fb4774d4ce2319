"""A GPT-style transformer layer in plain torch, for measuring activation memory.

Shown in chapter 11 (what a layer keeps for backward, against Korthikanti et al.'s
per-layer formula); used again in chapters 12, 13, 14 and 20.

The layer follows the one Korthikanti et al. (2022) count, in the pre-LayerNorm
arrangement GPT-2 and its successors use::

    x ─ LayerNorm ─ Linear(h, 3h) ─ attention(a heads) ─ Linear(h, h) ─ Dropout ─ + ─┐
    └──────────────────────────────────────────────────────────────────────────────┘
    y ─ LayerNorm ─ Linear(h, 4h) ─ GELU ─ Linear(4h, h) ─ Dropout ─ + ─> out
    └───────────────────────────────────────────────────────────────┘

Attention is either ``"sdpa"`` (``torch.nn.functional.scaled_dot_product_attention``,
which on CPU and on recent GPUs picks a fused, memory-efficient kernel that never
stores the s×s score matrix) or ``"naive"`` (scores, softmax, dropout and the product
with V written out, so each of them is saved for backward: the paper's 5·a·s²·b term).

Shapes: inputs and outputs are ``(batch, seq, hidden)``; every tensor follows the
layer's dtype (``torch.bfloat16`` works on CPU).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint, noop_context_fn

__all__ = ["CausalSelfAttention", "MLP", "GPTBlock", "GPTStack", "korthikanti_layer_bytes",
           "layer_saved_terms", "sdpa_backend", "ATTENTION_KINDS", "SDPA_BACKENDS"]

ATTENTION_KINDS = ("sdpa", "naive")
# What scaled_dot_product_attention can run, by the ATen operator it dispatches to.
SDPA_BACKENDS = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_fused_attention_overrideable": "fused (other device)",
}


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: ``(b, s, h) -> (b, s, h)``. Shown in chapter 11.

    Args:
        hidden: model width h (must be divisible by ``n_heads``).
        n_heads: number of heads a; each has width h / a.
        dropout: probability for the dropout after the output projection and, with
            naive attention only, on the attention probabilities. The fused path
            runs without attention dropout (as most current LLMs train): on CPU
            ``scaled_dot_product_attention`` has no fused kernel with dropout and
            falls back to a float32 math path that keeps several s×s matrices, which
            would defeat the point of the efficient-attention measurement.
        attention: ``"sdpa"`` or ``"naive"``.
        max_seq: longest sequence the naive path's causal mask covers.
    """

    def __init__(self, hidden: int, n_heads: int, dropout: float = 0.1,
                 attention: str = "sdpa", max_seq: int = 2048,
                 dtype: torch.dtype | None = None, device=None):
        super().__init__()
        if hidden % n_heads:
            raise ValueError(f"hidden ({hidden}) must be divisible by n_heads ({n_heads})")
        if attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.hidden, self.n_heads, self.dropout = hidden, n_heads, dropout
        self.attention = attention
        self.max_seq = max_seq
        kw = dict(dtype=dtype, device=device)
        self.qkv = nn.Linear(hidden, 3 * hidden, **kw)
        self.proj = nn.Linear(hidden, hidden, **kw)
        self.resid_dropout = nn.Dropout(dropout)
        # True above the diagonal: the future a position may not attend to. A buffer,
        # so it is shared by every call (and excluded from activation counts along
        # with the parameters when a meter is given the module).
        self.register_buffer(
            "future", torch.ones(max_seq, max_seq, dtype=torch.bool, device=device).triu(1),
            persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.hidden:
            raise ValueError(f"expected input (batch, seq, {self.hidden}), got {tuple(x.shape)}")
        b, s, h = x.shape
        a, d = self.n_heads, h // self.n_heads
        # One (b, s, 3h) matmul; q, k, v are views of its output (one storage).
        q, k, v = self.qkv(x).view(b, s, 3, a, d).permute(2, 0, 3, 1, 4)  # each (b, a, s, d)
        p = self.dropout if self.training else 0.0
        if self.attention == "sdpa":
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # no s×s kept
        else:
            if s > self.max_seq:
                raise ValueError(f"sequence length {s} exceeds max_seq={self.max_seq}")
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))      # (b, a, s, s)
            scores = scores.masked_fill(self.future[:s, :s], float("-inf"))
            probs = F.dropout(scores.softmax(dim=-1), p=p, training=self.training)
            ctx = probs @ v                                                 # (b, a, s, d)
        # Heads back side by side. A copy after the naive product; after the CPU fused
        # kernel a free view (its output is already laid out as (b, s, a, d)).
        ctx = ctx.transpose(1, 2).reshape(b, s, h)
        return self.resid_dropout(self.proj(ctx))


class MLP(nn.Module):
    """``(b, s, h) -> (b, s, h)``: Linear(h, 4h), GELU, Linear(4h, h), Dropout.
    Shown in chapter 11."""

    def __init__(self, hidden: int, dropout: float = 0.1, expansion: int = 4,
                 dtype: torch.dtype | None = None, device=None):
        super().__init__()
        kw = dict(dtype=dtype, device=device)
        self.fc = nn.Linear(hidden, expansion * hidden, **kw)
        self.act = nn.GELU()
        self.proj = nn.Linear(expansion * hidden, hidden, **kw)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(self.act(self.fc(x))))


class GPTBlock(nn.Module):
    """One pre-LayerNorm GPT layer: ``x + attn(ln1(x))``, then ``y + mlp(ln2(y))``.
    Shown in chapter 11.

    Shapes ``(batch, seq, hidden) -> (batch, seq, hidden)``. ``attention`` selects
    ``"sdpa"`` (fused, no s×s matrix kept) or ``"naive"`` (scores kept).
    """

    def __init__(self, hidden: int, n_heads: int, dropout: float = 0.1,
                 attention: str = "sdpa", max_seq: int = 2048,
                 dtype: torch.dtype | None = None, device=None):
        super().__init__()
        kw = dict(dtype=dtype, device=device)
        self.ln1 = nn.LayerNorm(hidden, **kw)
        self.attn = CausalSelfAttention(hidden, n_heads, dropout, attention, max_seq, **kw)
        self.ln2 = nn.LayerNorm(hidden, **kw)
        self.mlp = MLP(hidden, dropout, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.attn.hidden:
            raise ValueError(f"expected input (batch, seq, {self.attn.hidden}), got {tuple(x.shape)}")
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPTStack(nn.Module):
    """``n_layers`` GPTBlocks in sequence, optionally each one checkpointed. Shown in
    chapter 11 (the loop below); chapter 12 passes selective policies.

    ``checkpoint``: False (keep everything), True (every layer under
    ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``: keep its input,
    rebuild the rest in backward), or a ``context_fn`` for that call, e.g.
    ``functools.partial(create_selective_checkpoint_contexts, policy)``.
    """

    def __init__(self, n_layers: int, hidden: int, n_heads: int, dropout: float = 0.1,
                 attention: str = "sdpa", max_seq: int = 2048, checkpoint=False,
                 dtype: torch.dtype | None = None, device=None):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        self.layers = nn.ModuleList(
            GPTBlock(hidden, n_heads, dropout, attention, max_seq, dtype=dtype, device=device)
            for _ in range(n_layers))
        self.checkpoint = checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            if self.checkpoint is False or not torch.is_grad_enabled():
                x = layer(x)                           # keeps everything for backward
            else:                                      # keeps x, rebuilds the rest
                context_fn = noop_context_fn if self.checkpoint is True else self.checkpoint
                x = checkpoint(layer, x, use_reentrant=False, context_fn=context_fn)
        return x


def korthikanti_layer_bytes(b: int, s: int, h: int, a: int, attention: str = "sdpa") -> int:
    """Korthikanti et al. (2022), activations one transformer layer keeps, in bytes.
    Shown in chapter 11.

    16-bit activations, 1-byte dropout masks: ``34·s·b·h`` with a fused attention
    kernel ("sdpa"), ``34·s·b·h + 5·a·s²·b`` when the scores are materialised
    ("naive"): 2·a·s²·b softmax output, a·s²·b its dropout mask, 2·a·s²·b the dropout
    output that multiplies V.
    """
    for name, v in (("b", b), ("s", s), ("h", h), ("a", a)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}")
    base = 34 * s * b * h
    return base if attention == "sdpa" else base + 5 * a * s * s * b


def layer_saved_terms(b: int, s: int, h: int, a: int, attention: str = "sdpa",
                      dropout: bool = True, act_bytes: int = 2, mask_bytes: int = 1,
                      stat_bytes: int = 0, lse_bytes: int = 0,
                      sdpa_math: bool = False) -> dict[str, int]:
    """What one ``GPTBlock`` saves for backward, term by term, in bytes. Shown in
    chapter 11.

    The same bookkeeping as Korthikanti et al., for this module's code:

    ========================  =====================  ==================================
    term                      bytes                  saved by
    ========================  =====================  ==================================
    LayerNorm 1 input         act·s·b·h              ln1 (the layer input x)
    QKV matmul input          act·s·b·h              qkv Linear (ln1's output)
    Q, K, V                   3·act·s·b·h            attention (views of one storage)
    softmax output            act·a·s²·b             naive only: softmax, and @V
    attention dropout mask    mask·a·s²·b            naive with dropout
    attention dropout output  act·a·s²·b             naive with dropout: @V's input
    projection input          act·s·b·h              proj Linear (attention output)
    attention dropout mask    mask·s·b·h             after proj, with dropout
    LayerNorm 2 input         act·s·b·h              ln2
    MLP up input              act·s·b·h              fc Linear (ln2's output)
    GELU input                4·act·s·b·h            GELU
    MLP down input            4·act·s·b·h            proj Linear (GELU's output)
    MLP dropout mask          mask·s·b·h             after the MLP, with dropout
    LayerNorm statistics      2·2·stat·s·b           mean and 1/std of each LayerNorm
    attention logsumexp       lse·a·s·b              the fused kernel's softmax summary
    ========================  =====================  ==================================

    With ``act_bytes=2, mask_bytes=1`` and dropout the large terms add up to the
    paper's ``34·s·b·h`` (+ ``5·a·s²·b`` for "naive"). On a CPU, torch keeps dropout
    masks in the activations' dtype (``mask_bytes = act_bytes``) and LayerNorm
    statistics in it too (``stat_bytes = act_bytes``); the CPU fused attention keeps a
    float32 logsumexp (``lse_bytes = 4``). Zero-byte terms are left out.

    ``sdpa_math=True``: ``scaled_dot_product_attention`` ran its "math" fallback (see
    `sdpa_backend`; a CPU with attention dropout, pre-Ampere GPUs in bf16) on 16-bit
    inputs (``act_bytes=2``). That path upcasts Q, K and V to float32 (a scaled copy of
    each is saved, 12·s·b·h bytes, in place of the Q, K, V term) and saves the float32
    softmax (4·a·s²·b) instead of a log-sum-exp. On float32 inputs it keeps other
    tensors, which this count does not model: ``ValueError``.
    """
    for name, v in (("b", b), ("s", s), ("h", h), ("a", a)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}")
    if sdpa_math and attention != "sdpa":
        raise ValueError("sdpa_math=True describes attention='sdpa' only")
    if sdpa_math and act_bytes != 2:
        raise ValueError(f"sdpa_math=True describes 16-bit inputs (act_bytes=2), got act_bytes={act_bytes}")
    sbh, as2b = s * b * h, a * s * s * b
    naive = attention == "naive"
    terms = {
        "LayerNorm 1 input": act_bytes * sbh,
        "QKV matmul input": act_bytes * sbh,
        "Q, K, V": 3 * (4 if sdpa_math else act_bytes) * sbh,
        "softmax output": act_bytes * as2b if naive else 4 * as2b if sdpa_math else 0,
        "attention dropout mask": mask_bytes * as2b if naive and dropout else 0,
        "attention dropout output": act_bytes * as2b if naive and dropout else 0,
        "projection input": act_bytes * sbh,
        "projection dropout mask": mask_bytes * sbh if dropout else 0,
        "LayerNorm 2 input": act_bytes * sbh,
        "MLP up input": act_bytes * sbh,
        "GELU input": 4 * act_bytes * sbh,
        "MLP down input": 4 * act_bytes * sbh,
        "MLP dropout mask": mask_bytes * sbh if dropout else 0,
        "LayerNorm statistics": 2 * 2 * stat_bytes * s * b,
        "attention logsumexp": 0 if naive or sdpa_math else lse_bytes * a * s * b,
    }
    return {k: v for k, v in terms.items() if v}


def sdpa_backend(b: int, s: int, h: int, a: int, dtype=torch.float32, device="cpu",
                 dropout_p: float = 0.0, is_causal: bool = True) -> str:
    """Which kernel ``scaled_dot_product_attention`` runs for these shapes here.

    Shown in chapter 11. Calls it once on random (b, a, s, h/a) query, key and value
    tensors that require grad (as in training), under a dispatch mode that records the
    ATen operators, and returns the name in `SDPA_BACKENDS` of the fused kernel it
    dispatched to, or ``"math"`` when it decomposed into separate matrix products and a
    softmax (the fallback that keeps s×s matrices: a CPU with ``dropout_p > 0``, flash
    and memory-efficient attention in bf16 on GPUs older than Ampere).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    if h % a:
        raise ValueError(f"h ({h}) must be divisible by a ({a})")
    seen: list[str] = []

    class _Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    q, k, v = (torch.randn(b, a, s, h // a, dtype=dtype, device=device, requires_grad=True)
               for _ in range(3))
    with _Ops():
        F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)
    return next((SDPA_BACKENDS[op] for op in seen if op in SDPA_BACKENDS), "math")
