"""Optimizers with torch's update rules, updating parameters in place.

Their state arrays (SGD's momentum buffers, AdamW's ``exp_avg`` and
``exp_avg_sq``) are created lazily at the first ``step()`` (as in torch) and are
counted by the memory ledger as ``"optimizer"``. Updates run in the
parameters' dtype (float32 stays float32).
"""
from __future__ import annotations

import math

import numpy as np

from minigrad._validation import check_number
from minigrad.hooks import hold_role

__all__ = ["Optimizer", "SGD", "AdamW"]


class Optimizer:
    """Base class: holds the parameters, the learning rate and per-parameter state.

    Args:
        params: an iterable of tensors that require grad (``model.parameters()``).
        lr: the learning rate, a finite number >= 0.

    Raises:
        ValueError: an empty parameter list, or a learning rate that is negative, NaN or
            infinite (named).
        TypeError: a parameter that is not a tensor requiring grad.
    """
    def __init__(self, params, lr: float):
        where = type(self).__name__
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{where}: got an empty parameter list")
        for i, p in enumerate(self.params):
            if not (getattr(p, "requires_grad", False) and hasattr(p, "grad")):
                raise TypeError(f"{where}: parameter {i} is not a Tensor that requires grad "
                                f"(got {type(p).__name__})")
        self.lr = check_number("lr", lr, 0.0, where=where)
        self.state: dict[int, dict] = {}

    def zero_grad(self, set_to_none: bool = True):
        """Drop the gradients (``set_to_none``, torch's default, frees them) or zero them in place."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad[...] = 0

    def _state_array(self, p, name):
        st = self.state.setdefault(id(p), {})
        if name not in st:
            st[name] = np.zeros_like(p.data)
            hold_role(st[name], "optimizer")
        return st[name]


class SGD(Optimizer):
    """``p -= lr * (g + weight_decay * p)``, with optional momentum (torch's formulation:
    ``buf = momentum * buf + g`` after the first step, ``buf = g`` at the first).

    Example:
        >>> from minigrad import Tensor, nn
        >>> model = nn.Linear(3, 1)
        >>> opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> loss = model(Tensor(np.ones((2, 3), np.float32))).sum()
        >>> opt.zero_grad(); loss.backward(); opt.step()
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.momentum = check_number("momentum", momentum, 0.0, where="SGD")
        self.weight_decay = check_number("weight_decay", weight_decay, 0.0, where="SGD")

    def step(self):
        for p in self.params:
            if p.grad is None:
                continue
            g = p.grad
            if self.weight_decay:
                g = g + self.weight_decay * p.data
            if self.momentum:
                first = "momentum_buffer" not in self.state.get(id(p), {})
                buf = self._state_array(p, "momentum_buffer")
                if first:
                    buf[...] = g
                else:
                    buf *= self.momentum
                    buf += g
                g = buf
            p.data -= self.lr * g


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter), torch's update:

    ``p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)``.

    Args:
        params: the parameters.
        lr: learning rate (finite, >= 0).
        betas: ``(beta1, beta2)``, each in [0, 1).
        eps, weight_decay: finite, >= 0.

    Example:
        >>> from minigrad import Tensor, nn
        >>> model = nn.Linear(3, 1)
        >>> opt = AdamW(model.parameters(), lr=1e-3)
        >>> loss = model(Tensor(np.ones((2, 3), np.float32))).sum()
        >>> opt.zero_grad(); loss.backward(); opt.step()
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"AdamW: betas must be a pair (beta1, beta2), got {betas!r}")
        b1 = check_number("betas[0]", betas[0], 0.0, 1.0, where="AdamW", hi_open=True)
        b2 = check_number("betas[1]", betas[1], 0.0, 1.0, where="AdamW", hi_open=True)
        self.betas = (b1, b2)
        self.eps = check_number("eps", eps, 0.0, where="AdamW")
        self.weight_decay = check_number("weight_decay", weight_decay, 0.0, where="AdamW")
        self.step_count = 0

    def step(self):
        self.step_count += 1
        t = self.step_count
        b1, b2 = self.betas
        bc1 = 1.0 - b1 ** t
        bc2_sqrt = math.sqrt(1.0 - b2 ** t)
        # One scratch array reused for every parameter (freed when step returns):
        # fewer fresh allocations, fewer passes over memory.
        scratch = np.empty(max(p.data.size for p in self.params), dtype=self.params[0].dtype)
        for p in self.params:
            if p.grad is None:
                continue
            g = p.grad
            tmp = scratch[: g.size].reshape(g.shape) if scratch.dtype == g.dtype else np.empty_like(g)
            if self.weight_decay:
                p.data *= 1.0 - self.lr * self.weight_decay
            m = self._state_array(p, "exp_avg")
            v = self._state_array(p, "exp_avg_sq")
            m *= b1
            np.multiply(g, 1.0 - b1, out=tmp)
            m += tmp
            v *= b2
            np.multiply(g, g, out=tmp)
            tmp *= 1.0 - b2
            v += tmp
            np.sqrt(v, out=tmp)
            tmp *= 1.0 / bc2_sqrt
            tmp += self.eps
            np.divide(m, tmp, out=tmp)
            tmp *= self.lr / bc1
            p.data -= tmp
