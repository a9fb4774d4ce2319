"""Gradients on shapes drawn by hypothesis: against torch in float64 and central differences.

Broadcasting pairs for the four arithmetic ops (numbers and 0-d tensors included),
reductions over any set of axes, softmax over any dimension, batched matrix products with
broadcast batch dimensions, and slicing; each drawn case is compared with torch (values and
gradients to 1e-10) and, for the arithmetic ops, with central differences.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

torch = pytest.importorskip("torch")

import minigrad.ops as F  # noqa: E402
from minigrad import Tensor  # noqa: E402

from test_ops import numeric_grad  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)


def run_both(mine, theirs, arrays, needs=None):
    """Forward and backward of ``sum(op(*xs) * w)`` in both frameworks; returns minigrad's
    inputs after asserting equal values and gradients."""
    needs = needs or [True] * len(arrays)
    m_in = [Tensor(a.copy(), requires_grad=r) for a, r in zip(arrays, needs)]
    t_in = [torch.tensor(a.copy(), requires_grad=r) for a, r in zip(arrays, needs)]
    m_out, t_out = mine(*m_in), theirs(*t_in)
    assert m_out.shape == tuple(t_out.shape)
    np.testing.assert_allclose(m_out.data, t_out.detach().numpy(), **TOL)
    w = np.random.default_rng(0).standard_normal(m_out.shape)
    (m_out * Tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    for m, t, r in zip(m_in, t_in, needs):
        if r:
            assert m.grad.shape == m.shape
            np.testing.assert_allclose(m.grad, t.grad.numpy(), **TOL)
        else:
            assert m.grad is None
    return m_in, w


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: a common shape, each side dropping leading dims and
    setting some dims to 1."""
    shape = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
    sides = []
    for _ in range(2):
        lead = draw(st.integers(0, len(shape)))
        sides.append(tuple(1 if draw(st.booleans()) else n for n in shape[lead:]))
    return sides


ARITH = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / (b * b + 0.5), lambda a, b: a / (b * b + 0.5)),
}


@pytest.mark.parametrize("name", sorted(ARITH))
@given(shapes=broadcast_pair(), needs=st.sampled_from([(True, True), (True, False), (False, True)]),
       seed=st.integers(0, 2**16))
def test_broadcast_arithmetic_matches_torch_and_central_differences(name, shapes, needs, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    mine, theirs = ARITH[name]
    m_in, w = run_both(mine, theirs, arrays, list(needs))
    scalar = lambda *xs: float((mine(*[Tensor(x) for x in xs]).data * w).sum())  # noqa: E731
    for i, need in enumerate(needs):
        if need:
            np.testing.assert_allclose(m_in[i].grad, numeric_grad(scalar, [a.copy() for a in arrays], i),
                                       rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(ARITH))
@given(shape=st.lists(st.integers(1, 4), max_size=3), number=st.floats(-3, 3).filter(lambda v: abs(v) > 0.1),
       left=st.booleans(), seed=st.integers(0, 2**16))
def test_a_number_on_either_side_matches_torch(name, shape, number, left, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    mine, theirs = ARITH[name]
    if left:
        run_both(lambda x: mine(number, x), lambda x: theirs(number, x), [a])
    else:
        run_both(lambda x: mine(x, number), lambda x: theirs(x, number), [a])


@st.composite
def shape_and_axes(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    axes = draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % len(shape),
                         min_size=1, max_size=len(shape)))
    return shape, tuple(axes)


@given(case=shape_and_axes(), keepdims=st.booleans(), mean=st.booleans(), seed=st.integers(0, 2**16))
def test_reductions_over_any_axes_match_torch(case, keepdims, mean, seed):
    shape, axes = case
    a = np.random.default_rng(seed).standard_normal(shape)
    if mean:
        run_both(lambda x: x.mean(axis=axes, keepdims=keepdims), lambda x: x.mean(axes, keepdim=keepdims), [a])
    else:
        run_both(lambda x: x.sum(axis=axes, keepdims=keepdims), lambda x: x.sum(axes, keepdim=keepdims), [a])


@given(case=shape_and_axes(), log=st.booleans(), seed=st.integers(0, 2**16))
def test_softmax_over_any_dim_matches_torch(case, log, seed):
    shape, axes = case
    a = np.random.default_rng(seed).standard_normal(shape) * 3
    dim = axes[0]
    if log:
        run_both(lambda x: F.log_softmax(x, dim), lambda x: torch.log_softmax(x, dim), [a])
    else:
        run_both(lambda x: F.softmax(x, dim), lambda x: torch.softmax(x, dim), [a])


@st.composite
def matmul_shapes(draw):
    n, k, m = (draw(st.integers(1, 4)) for _ in range(3))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    sides = []
    for inner in ((n, k), (k, m)):
        lead = draw(st.integers(0, len(batch)))
        sides.append(tuple(1 if draw(st.booleans()) else b for b in batch[lead:]) + inner)
    return sides


@given(shapes=matmul_shapes(), needs=st.sampled_from([(True, True), (True, False), (False, True)]),
       seed=st.integers(0, 2**16))
def test_batched_matmul_with_broadcast_batches_matches_torch(shapes, needs, seed):
    rng = np.random.default_rng(seed)
    run_both(lambda a, b: a @ b, lambda a, b: a @ b, [rng.standard_normal(s) for s in shapes], list(needs))


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_slices_match_torch(shape, data):
    index = []
    for n in shape:
        start = data.draw(st.integers(-n, n - 1))
        stop = data.draw(st.integers(-n, n) | st.none())
        step = data.draw(st.integers(1, 3))
        index.append(slice(start, stop, step))
    index = tuple(index)
    a = np.random.default_rng(len(shape)).standard_normal(shape)
    assume(np.empty(shape)[index].size > 0)  # (an empty slice has no gradient to compare)
    run_both(lambda x: x[index] * 1.5, lambda x: x[index] * 1.5, [a])
