"""bookkit.gradcheck: gradients against central differences ("When recomputation lies")."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, ops
from bookkit.gradcheck import GradcheckError, gradcheck


def test_gradcheck_accepts_a_correct_backward_and_rejects_a_wrong_one():
    x = Tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda t: ops.tanh(t) * t, [x])

    class WrongSquare(minigrad.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a  # should be 2 * a

    with pytest.raises(GradcheckError, match="input 0"):
        gradcheck(lambda t: WrongSquare.apply(t), [x])
    assert gradcheck(lambda t: WrongSquare.apply(t), [x], raise_exception=False) is False


def test_gradcheck_refuses_float32_and_inputs_without_grad():
    with pytest.raises(ValueError, match="float64"):
        gradcheck(lambda t: t * t, [Tensor(np.ones(3, dtype=np.float32), requires_grad=True)])
    with pytest.raises(ValueError, match="requires_grad"):
        gradcheck(lambda t: t * t, [Tensor(np.ones(3))])
