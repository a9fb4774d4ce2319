"""Gradients against central differences, like ``torch.autograd.gradcheck`` (shown in
chapter 8; chapter 2's exercise uses it)."""
from __future__ import annotations

import numpy as np

from minigrad import Tensor, no_grad

__all__ = ["gradient_check", "gradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree (raised by `gradcheck`; shown in chapter 8)."""


def gradient_check(fn, inputs, eps: float = 1e-6):
    """Analytical and central-difference gradients of ``fn(*inputs).sum()`` (shown in chapter 8).

    ``inputs``: minigrad Tensors with ``requires_grad=True`` and dtype float64 (float32
    differences are too coarse to judge a gradient); ``fn`` returns one Tensor.
    Returns one ``(analytical, numerical)`` pair of arrays (each of the input's shape) per
    input. Costs two calls of ``fn`` per input element: for small inputs only."""
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
    """Like ``torch.autograd.gradcheck`` (shown in chapter 8): True if ``fn``'s backward agrees with
    central differences (``|analytical - numerical| <= atol + rtol * |numerical|`` everywhere).

    Otherwise raises `GradcheckError` naming the input, the element and both values (or
    returns False with ``raise_exception=False``). See `gradient_check`."""
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
