"""bookkit.partone: the measuring helpers Part I's chapters rely on."""
from __future__ import annotations

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, ops, plan
from bookkit import partone


def _chain(n=6, batch=4):
    layers = partone.block_chain([8, 16, 4, 12, 8, 20, 6][: n + 1], hidden=10, seed=1)
    x = Tensor(np.random.default_rng(0).standard_normal((batch, 8)).astype(np.float32))
    return layers, x


@pytest.mark.parametrize("starts", [[0], [0, 2], [0, 1, 3, 5], [0, 4]])
def test_measured_peak_equals_the_planner_prediction(starts):
    layers, x = _chain()
    predicted = plan.predict_peak(plan.profile_chain(layers, x), starts)
    step = partone.measure_chain_step(layers, x, starts)
    assert step.peak_activations == predicted
    assert step.recompute_ops <= step.forward_ops  # one-level: at most one extra forward


def test_checkpointed_gradients_are_bit_identical_to_plain():
    layers, x = _chain()
    plain = partone.measure_chain_step(layers, x, None)
    ckpt = partone.measure_chain_step(layers, x, [0, 2, 4])
    assert plain.recompute_ops == 0 and ckpt.recompute_ops > 0
    assert all(np.array_equal(a, b) for a, b in zip(plain.grads, ckpt.grads))


@pytest.mark.parametrize("power", [0.5, 1.0, 2.0])
def test_loglog_slope_recovers_the_exponent(power):
    xs = np.array([2.0, 4.0, 16.0, 100.0])
    assert partone.loglog_slope(xs, 3.0 * xs ** power) == pytest.approx(power, abs=1e-12)


def test_loglog_slope_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        partone.loglog_slope([1, 2], [0, 1])
    with pytest.raises(ValueError, match="equal length"):
        partone.loglog_slope([1, 2, 3], [1, 2])


def test_gradcheck_accepts_a_correct_backward_and_rejects_a_wrong_one():
    x = Tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True, dtype=np.float64)
    assert partone.gradcheck(lambda t: ops.tanh(t) * t, [x])

    class WrongSquare(minigrad.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a  # should be 2 * a

    with pytest.raises(partone.GradcheckError, match="input 0"):
        partone.gradcheck(lambda t: WrongSquare.apply(t), [x])
    assert partone.gradcheck(lambda t: WrongSquare.apply(t), [x], raise_exception=False) is False


def test_gradcheck_refuses_float32():
    x = Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    with pytest.raises(ValueError, match="float64"):
        partone.gradcheck(lambda t: t * t, [x])


def test_blas_threads_restores_the_thread_count():
    found = partone._openblas()
    if found is None:
        pytest.skip("NumPy is not linked against OpenBLAS here")
    _, get_threads = found
    before = get_threads()
    with partone.blas_threads(1):
        assert get_threads() == 1
    assert get_threads() == before


def test_block_chain_validates_its_sizes():
    with pytest.raises(ValueError, match="hidden has 1 entries"):
        partone.block_chain([4, 4, 4], hidden=[3])
    with pytest.raises(ValueError, match="activation"):
        partone.block_chain([4, 4], hidden=3, activation="sigmoid")
