"""Counting the floating-point operations of a training step, forward and backward apart.

Wall-clock times depend on the machine, its load and its kernels; FLOP counts do not.
Part II states compute in FLOPs, counted by torch's own
``torch.utils.flop_counter.FlopCounterMode``: a dispatch mode that adds up, for every
matrix product, convolution and attention kernel an operation runs, 2 FLOPs per
multiply-add (elementwise operations, softmax and normalisations count 0: they are
a small share of a large model's arithmetic, and a larger share of its time on a CPU).
The counts are exact integers, the same on every CPU and GPU.

``count_flops(fn)``
    FLOPs of one call.
``forward_backward_flops(forward)``
    ``StepFlops(forward, backward)`` of ``loss = forward()`` and ``loss.backward()``;
    with checkpointing, the recomputation is part of the backward count.
``korthikanti_layer_flops(b, s, h)``
    Korthikanti et al.'s forward FLOPs of one transformer layer, 24·b·s·h² + 4·b·s²·h.

torch 2.13 has no FLOP formula for the CPU's fused attention kernel
(``_scaled_dot_product_flash_attention_for_cpu``) nor for the in-place products
``addmm_`` and ``baddbmm_`` (a chunked loss accumulates its weight gradient with
``addmm_``), and counts them as 0; the counter here adds the formulas torch uses for
the GPU kernels and for ``addmm``/``baddbmm``. Shown in chapter 12.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["flop_counter_mode", "count_flops", "StepFlops", "forward_backward_flops",
           "korthikanti_layer_flops"]


def _cpu_flash_forward(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_flash_backward(grad_out_shape, query_shape, key_shape, value_shape, *args,
                        out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _inplace_addmm(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.mm_flop(a_shape, b_shape)


def _inplace_baddbmm(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.bmm_flop(a_shape, b_shape)


def _missing_formulas() -> dict:
    aten = torch.ops.aten
    formulas = {}
    for name, formula in (("_scaled_dot_product_flash_attention_for_cpu", _cpu_flash_forward),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_flash_backward),
                          ("addmm_", _inplace_addmm), ("baddbmm_", _inplace_baddbmm)):
        op = getattr(aten, name, None)
        if op is not None and op not in flop_counter.flop_registry:
            formulas[op] = formula
    return formulas


def flop_counter_mode() -> FlopCounterMode:
    """A silent ``FlopCounterMode`` that also counts the CPU's fused attention kernel
    and the in-place matrix products ``addmm_`` and ``baddbmm_``.

    Use it as a context manager; ``get_total_flops()`` afterwards. Shown in chapter 12.
    """
    return FlopCounterMode(display=False, custom_mapping=_missing_formulas())


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs (2 per multiply-add of matrix products, convolutions and attention) of
    ``fn()``, counted by `flop_counter_mode`. Shown in chapter 12."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with flop_counter_mode() as mode:
        fn()
    return int(mode.get_total_flops())


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of a step's forward pass and of its backward pass (recomputation
    included). Shown in chapter 12."""

    forward: int
    backward: int

    @property
    def step(self) -> int:
        return self.forward + self.backward

    @property
    def backward_per_forward(self) -> float:
        """B/F in FLOPs: 2 for matrix products (two products per product in backward)."""
        return self.backward / self.forward

    def overhead_over(self, plain: "StepFlops") -> float:
        """Extra FLOPs of this step as a fraction of ``plain``'s: the time a checkpointed
        step adds when time follows arithmetic."""
        return self.step / plain.step - 1


def forward_backward_flops(forward: Callable[[], torch.Tensor]) -> StepFlops:
    """Count ``loss = forward()`` and ``loss.backward()`` apart. Shown in chapter 12.

    ``forward`` must return a one-element tensor that requires grad. Gradients
    accumulate in the parameters as in any backward; reset them afterwards if needed.
    """
    with flop_counter_mode() as fwd:
        loss = forward()
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
        raise ValueError("forward() must return a one-element tensor that requires grad, got "
                         + (f"shape {tuple(loss.shape)}, requires_grad={loss.requires_grad}"
                            if isinstance(loss, torch.Tensor) else type(loss).__name__))
    with flop_counter_mode() as bwd:
        loss.backward()
    return StepFlops(int(fwd.get_total_flops()), int(bwd.get_total_flops()))


def korthikanti_layer_flops(b: int, s: int, h: int) -> int:
    """Forward FLOPs of one transformer layer (Korthikanti et al., 2022): 24·b·s·h²
    for the QKV, output and two MLP projections, 4·b·s²·h for the two attention
    products (Q·Kᵀ and the product with V), at 2 FLOPs per multiply-add and with the
    full s×s matrix (a causal mask does not reduce the count). Shown in chapter 12.
    """
    for name, v in (("b", b), ("s", s), ("h", h)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return 24 * b * s * h * h + 4 * b * s * s * h
