"""Helpers shared by Part I of the book (chapters 1-6, minigrad).

Chapters 1-3 and 4-6 add their functions here; the notebooks import them instead of
copying code from one another. Everything works on minigrad alone (NumPy).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "block_chain",
    "run_chain",
    "ChainStep",
    "measure_chain_step",
    "time_chain_step",
    "loglog_slope",
    "gradient_check",
    "gradcheck",
    "GradcheckError",
]


# --- chapters 4-5: chains of blocks, measured -----------------------------------------

def block_chain(widths, hidden, seed: int = 0, dtype=np.float32) -> list:
    """A chain of ``n`` MLP blocks ``Linear(widths[i], hidden[i]) -> Tanh -> Linear(hidden[i], widths[i+1])``.

    ``widths``: ``n + 1`` boundary widths (the chain's input is ``(batch, widths[0])``,
    block ``i`` maps ``(batch, widths[i])`` to ``(batch, widths[i+1])``); ``hidden``:
    ``n`` inner widths, or one int for all blocks. For a batch ``b`` in float32,
    block ``i`` saves for backward its input (``4 b widths[i]`` bytes) and its Tanh
    output (``4 b hidden[i]`` bytes); its output is saved by the next block.
    Parameters are drawn from ``minigrad.random`` seeded with ``seed``."""
    from minigrad import nn, random

    widths = [int(w) for w in widths]
    n = len(widths) - 1
    if n < 1:
        raise ValueError(f"block_chain: widths needs at least 2 entries (n + 1 boundaries), got {widths}")
    hidden = [int(hidden)] * n if np.ndim(hidden) == 0 else [int(h) for h in hidden]
    if len(hidden) != n:
        raise ValueError(f"block_chain: hidden has {len(hidden)} entries, expected n={n} "
                         f"(one per block, len(widths) - 1)")
    if min(widths) < 1 or min(hidden) < 1:
        raise ValueError(f"block_chain: widths and hidden sizes must be >= 1, got {widths}, {hidden}")
    random.manual_seed(seed)
    return [nn.Sequential(nn.Linear(widths[i], hidden[i], dtype=dtype), nn.Tanh(),
                          nn.Linear(hidden[i], widths[i + 1], dtype=dtype)) for i in range(n)]


def run_chain(layers, x, plan=None):
    """Output of ``layers`` applied in turn to ``x``: plainly (``plan=None``) or through
    ``minigrad.checkpoint.checkpoint_sequential(layers, plan, x)`` (``plan``: a number
    of segments, a list of segment starts, a `minigrad.plan` plan or a Revolve plan)."""
    from minigrad.checkpoint import checkpoint_sequential

    if plan is None:
        h = x
        for layer in layers:
            h = layer(h)
        return h
    return checkpoint_sequential(layers, plan, x)


@dataclass
class ChainStep:
    """One forward + backward of ``run_chain(...).sum()``, as the byte ledger saw it.

    ``peak_activations`` / ``peak_total``: bytes (``m.peak["activations"]`` and
    ``m.peak["total"]``, the latter with parameters, gradients and temporaries);
    ``forward_ops``: op executions of the forward pass (checkpoint nodes not
    counted); ``recompute_ops``: op executions repeated in backward; ``grads``:
    copies of the parameters' gradients after the step (a list of arrays)."""

    peak_activations: int
    peak_total: int
    forward_ops: int
    recompute_ops: int
    grads: list = field(repr=False)

    @property
    def extra_forwards(self) -> float:
        """Recomputed op executions as a fraction of one forward pass."""
        return self.recompute_ops / self.forward_ops


def _params(layers):
    return [p for layer in layers for p in layer.parameters()]


def measure_chain_step(layers, x, plan=None, seed: int = 0) -> ChainStep:
    """Run one forward and backward of ``run_chain(layers, x, plan).sum()`` under
    ``minigrad.memory.track`` and report bytes and op counts (see `ChainStep`).

    ``x``: a minigrad Tensor ``(batch, widths[0])``. Gradients are reset first;
    ``minigrad.random`` is seeded with ``seed`` (dropout masks are reproducible)."""
    import minigrad
    from minigrad import memory

    for p in _params(layers):
        p.grad = None
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        y = run_chain(layers, x, plan)
        y.sum().backward()
        del y
    grads = [p.grad.copy() for p in _params(layers)]
    for p in _params(layers):
        p.grad = None
    fwd = m.ops("forward") - m.counts["forward"].get("checkpoint", 0)
    return ChainStep(peak_activations=int(m.peak["activations"]), peak_total=int(m.peak["total"]),
                     forward_ops=int(fwd), recompute_ops=int(m.ops("recompute")), grads=grads)


def time_chain_step(layers, x, plan=None, repeat: int = 5) -> float:
    """Wall-clock seconds of one forward + backward of ``run_chain(layers, x, plan).sum()``:
    the fastest of ``repeat`` runs (the least disturbed by other work on the machine)."""
    if repeat < 1:
        raise ValueError(f"time_chain_step: repeat must be >= 1, got {repeat}")
    best = math.inf
    for _ in range(repeat):
        for p in _params(layers):
            p.grad = None
        start = time.perf_counter()
        y = run_chain(layers, x, plan)
        y.sum().backward()
        best = min(best, time.perf_counter() - start)
        del y
    for p in _params(layers):
        p.grad = None
    return best


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of ``log(ys)`` against ``log(xs)``: the exponent ``p`` of
    ``ys ~ c * xs**p``. Both must be positive sequences of the same length >= 2."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1 or len(xs) < 2:
        raise ValueError(f"loglog_slope: need two 1-d sequences of equal length >= 2, "
                         f"got shapes {xs.shape} and {ys.shape}")
    if (xs <= 0).any() or (ys <= 0).any():
        raise ValueError("loglog_slope: all values must be positive (logarithms)")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


# --- chapter 6: gradient checks ---------------------------------------------------------

class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree (raised by `gradcheck`)."""


def gradient_check(fn, inputs, eps: float = 1e-6):
    """Analytical and central-difference gradients of ``fn(*inputs).sum()``.

    ``inputs``: minigrad Tensors with ``requires_grad=True`` and dtype float64 (float32
    differences are too coarse to judge a gradient); ``fn`` returns one Tensor.
    Returns a list with one ``(analytical, numerical)`` pair of arrays (each of the
    input's shape) per input. Costs two calls of ``fn`` per input element: for small
    inputs only."""
    from minigrad import Tensor, no_grad

    inputs = list(inputs)
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise ValueError(f"gradient_check: input {i} must be a Tensor with requires_grad=True")
        if t.dtype != np.float64:
            raise ValueError(f"gradient_check: input {i} has dtype {t.dtype}; use float64 "
                             f"(central differences in float32 are too inaccurate)")
        t.grad = None
    fn(*inputs).sum().backward()
    analytical = [np.zeros(t.shape) if t.grad is None else t.grad.copy() for t in inputs]
    out = []
    with no_grad():
        for t, ga in zip(inputs, analytical):
            gn = np.zeros(t.shape)
            flat = t.data.reshape(-1)  # a view: perturbing it perturbs the input
            for j in range(flat.size):
                old = flat[j]
                flat[j] = old + eps
                up = float(fn(*inputs).data.sum())
                flat[j] = old - eps
                down = float(fn(*inputs).data.sum())
                flat[j] = old
                gn.reshape(-1)[j] = (up - down) / (2 * eps)
            out.append((ga, gn))
    for t in inputs:
        t.grad = None
    return out


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """Like ``torch.autograd.gradcheck``: True if ``fn``'s backward agrees with central
    differences (``|analytical - numerical| <= atol + rtol * |numerical|`` everywhere).

    Otherwise raises `GradcheckError` naming the input, the element and both values
    (or returns False with ``raise_exception=False``). See `gradient_check`."""
    for i, (ga, gn) in enumerate(gradient_check(fn, inputs, eps)):
        bad = np.abs(ga - gn) > atol + rtol * np.abs(gn)
        if bad.any():
            if not raise_exception:
                return False
            j = np.unravel_index(int(np.argmax(np.abs(ga - gn))), ga.shape)
            raise GradcheckError(
                f"gradcheck: Jacobian mismatch for input {i} at element {tuple(int(k) for k in j)}: "
                f"analytical {ga[j]:.6g}, numerical {gn[j]:.6g} ({int(bad.sum())} of {bad.size} "
                f"elements differ beyond atol={atol}, rtol={rtol})")
    return True
