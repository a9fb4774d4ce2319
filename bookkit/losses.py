"""A cross-entropy over a large vocabulary that never holds the full logits.

A language model ends with a projection to the vocabulary and a cross-entropy::

    logits = F.linear(hidden, weight, bias)        # (N, V): N positions, V tokens
    loss = F.cross_entropy(logits.float(), target)

For ``N = 2 × 1024`` positions and ``V = 248,000`` tokens the float32 logits alone take
about 2 GB, and autograd keeps a tensor of that size (the log-softmax) until backward,
which then creates the logits' gradient, as large again. Checkpointing the layers
below does not touch any of it (chapter 13).

``chunked_linear_cross_entropy`` computes the same loss ``chunk_size`` rows at a time.
The forward pass keeps only the inputs and one float32 number per row (the
log-sum-exp of its logits); the backward pass *recomputes* each chunk's logits, turns
them into their gradient in place (``softmax − one_hot``) and multiplies it straight
into the gradients of ``hidden``, ``weight`` and ``bias``. At no time do more than
``chunk_size × V`` logits exist, also inside operators: the log-sum-exp is computed
in the chunk's own memory (`logsumexp_`), because ``torch.logsumexp`` would allocate a
second chunk-sized temporary. This is checkpointing applied to the loss, the logits
rebuilt chunk by chunk. The price is a second ``hidden @ weight.T`` matmul per step.

Shown in chapter 13 (``ChunkedLinearCrossEntropy`` in full).
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = ["chunked_linear_cross_entropy", "ChunkedLinearCrossEntropy", "logsumexp_", "logits_bytes"]

_REDUCTIONS = ("mean", "sum", "none")


def logits_bytes(batch: int, seq: int, vocab: int, itemsize: int = 4) -> int:
    """Bytes of the logits ``(batch, seq, vocab)`` at ``itemsize`` bytes per number.

    ``logits_bytes(2, 1024, 248_000)`` = 2,031,616,000 bytes (≈ 2.0 GB) in float32.
    Their gradient, when backward creates it, takes as much again.

    Shown in chapter 13.
    """
    for name, v in (("batch", batch), ("seq", seq), ("vocab", vocab), ("itemsize", itemsize)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(batch) * int(seq) * int(vocab) * int(itemsize)


def _check(input, weight, target, bias, chunk_size, ignore_index, reduction):
    if not isinstance(input, torch.Tensor) or input.dim() < 1:
        raise ValueError(f"input must be a tensor (..., hidden), got {type(input).__name__}")
    if weight.dim() != 2 or weight.shape[1] != input.shape[-1]:
        raise ValueError(f"weight must be (vocab, hidden={input.shape[-1]}), "
                         f"got {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be (vocab={weight.shape[0]},), got {tuple(bias.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"target must hold class indices (int64), got dtype {target.dtype}")
    if tuple(target.shape) != tuple(input.shape[:-1]):
        raise ValueError(f"target shape {tuple(target.shape)} must equal input shape without "
                         f"its last dimension, {tuple(input.shape[:-1])}")
    if isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    vocab = weight.shape[0]
    bad = ((target < 0) | (target >= vocab)) & (target != ignore_index)
    if bool(bad.any()):
        first = target[bad].flatten()[0].item()
        raise ValueError(f"target holds {first}, outside [0, vocab={vocab}) and not "
                         f"ignore_index={ignore_index}")


def logsumexp_(z: torch.Tensor) -> torch.Tensor:
    """Row-wise log-sum-exp of ``z`` (rows, V), computed in ``z``'s own memory.

    ``torch.logsumexp`` allocates a temporary as large as its input; this version
    overwrites ``z`` with ``exp(z - max)`` instead, so that nothing of size rows × V
    exists beyond ``z`` itself. Returns a (rows,) tensor; ``z`` is destroyed.

    Shown in chapter 13.
    """
    m = z.amax(dim=1)                                                  # (rows,)
    m = torch.where(torch.isinf(m), 0.0, m)       # all -inf row: no nan, -inf comes out
    z.sub_(m[:, None]).exp_()
    return z.sum(dim=1).log_().add_(m)


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    """``cross_entropy(linear(input, weight, bias).float(), target)`` by row chunks.

    Shown in chapter 13. ``forward(ctx, input (N, h), weight (V, h), bias (V,) or None,
    target (N,), chunk_size, ignore_index, reduction)``. Saved for backward:
    ``input``, ``weight``, ``bias``, the target, a validity mask and the per-row
    log-sum-exp ``lse`` (N,) in float32: never a logit.
    """

    @staticmethod
    def forward(ctx, input, weight, bias, target, chunk_size, ignore_index, reduction):
        n = input.shape[0]
        losses = torch.empty(n, dtype=torch.float32, device=input.device)
        lse = torch.empty(n, dtype=torch.float32, device=input.device)
        valid = target != ignore_index
        safe_target = torch.where(valid, target, 0).long()
        for start in range(0, n, chunk_size):
            rows = slice(start, start + chunk_size)
            logits = F.linear(input[rows], weight, bias).float()           # (c, V)
            picked = logits.gather(1, safe_target[rows, None]).squeeze(1)  # (c,) first...
            lse[rows] = logsumexp_(logits)                    # ...then overwrite logits
            losses[rows] = lse[rows] - picked
            del logits                                        # one chunk alive at a time
        ctx.save_for_backward(input, weight, bias, safe_target, valid, lse)
        ctx.chunk_size, ctx.reduction, ctx.n_valid = chunk_size, reduction, valid.sum()
        losses = losses.masked_fill(~valid, 0.0)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / ctx.n_valid  # nan when every target is ignored, as in torch

    @staticmethod
    def backward(ctx, grad_out):
        input, weight, bias, target, valid, lse = ctx.saved_tensors
        need_in, need_w, need_b = ctx.needs_input_grad[:3]
        # d loss_i / d logits_i = (softmax_i - one_hot(target_i)) * row_scale_i, where
        # row_scale_i is the upstream gradient of row i (0 for ignored rows).
        row_scale = grad_out.float()
        if ctx.reduction == "mean":
            row_scale = row_scale / ctx.n_valid
        row_scale = torch.where(valid, row_scale.expand(input.shape[0]), 0.0)
        grad_in = torch.empty_like(input) if need_in else None
        # Summed over chunks in at least float32: in a 16-bit dtype every chunk's sum
        # would be rounded again, and the error would grow with the number of chunks
        # (one full matmul rounds once). The buffers are the size of the weight.
        acc = torch.promote_types(weight.dtype, torch.float32)
        grad_w = torch.zeros_like(weight, dtype=acc) if need_w else None
        grad_b = torch.zeros_like(bias, dtype=acc) if need_b else None
        for start in range(0, input.shape[0], ctx.chunk_size):
            rows = slice(start, start + ctx.chunk_size)
            x = input[rows]
            # The recomputation: this chunk's logits again, then their gradient in place.
            g = F.linear(x, weight, bias).float()                          # (c, V)
            g.sub_(lse[rows, None]).exp_()                                 # softmax
            g.scatter_add_(1, target[rows, None], g.new_full((len(g), 1), -1.0))
            g.mul_(row_scale[rows, None])
            g = g.to(input.dtype)
            if need_in:
                torch.mm(g, weight, out=grad_in[rows])                     # no (c, h) copy
            if need_w:
                grad_w.addmm_(g.t().to(acc), x.to(acc))
            if need_b:
                grad_b.add_(g.sum(0, dtype=acc))
            del g
        if need_w:
            grad_w = grad_w.to(weight.dtype)
        if need_b:
            grad_b = grad_b.to(bias.dtype)
        return grad_in, grad_w, grad_b, None, None, None, None


def chunked_linear_cross_entropy(input: torch.Tensor, weight: torch.Tensor,
                                 target: torch.Tensor, bias: torch.Tensor | None = None,
                                 chunk_size: int = 1024, ignore_index: int = -100,
                                 reduction: str = "mean") -> torch.Tensor:
    """``F.cross_entropy(F.linear(input, weight, bias).float(), target)`` without ever
    holding more than ``chunk_size`` rows of logits. Shown in chapter 13.

    Args:
        input: hidden states ``(..., hidden)``, any float dtype (bf16 works on CPU).
        weight: the output projection ``(vocab, hidden)``, as in ``nn.Linear``.
        target: class indices ``(...)`` (int64), or ``ignore_index`` for positions
            that do not count.
        bias: ``(vocab,)`` or None.
        chunk_size: rows (positions) per chunk; the largest temporary is one
            ``chunk_size × vocab`` block of float32 logits (for a 16-bit or float64
            input, briefly also its copy in the input's dtype). In float32 the step
            peaks, beyond the inputs, at ``chunk_size·(vocab + 1)·4 + N·h·4 + 17·N``
            bytes plus a few scalars: the chunk and the column of −1s scattered into
            it, the gradient of ``input``, and per row the log-sum-exp and scale
            (float32), the target (int64) and a validity mask (bool); chapter 13
            measures it with the allocator's own events.
        ignore_index, reduction: as in ``torch.nn.functional.cross_entropy``
            (``"mean"`` averages over the targets that are not ignored).

    Returns the loss: a float32 scalar, or ``(...)`` per-position losses for
    ``reduction="none"``. Gradients flow to ``input``, ``weight`` and ``bias``; their
    gradients accumulate chunk by chunk in float32 (float64 for float64) and are then
    cast to their dtype, so a 16-bit weight's gradient is rounded once, as by one full
    matmul, at the cost of a float32 buffer the size of the weight.
    """
    _check(input, weight, target, bias, chunk_size, ignore_index, reduction)
    lead = input.shape[:-1]
    flat_in = input.reshape(-1, input.shape[-1])
    flat_t = target.reshape(-1)
    out = ChunkedLinearCrossEntropy.apply(flat_in, weight, bias, flat_t, int(chunk_size),
                                          ignore_index, reduction)
    return out.reshape(lead) if reduction == "none" else out
