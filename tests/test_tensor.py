"""The engine: graph recording, accumulation, freeing saved arrays, no_grad, dtypes."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor


def test_value_used_twice_accumulates_both_contributions():
    x = Tensor(np.array([2.0, -3.0]), requires_grad=True)
    y = x * x + x  # x feeds two ops (and mul twice): dy/dx = 2x + 1
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.data + 1)


def test_shared_intermediate_accumulates():
    x = Tensor(np.array([0.5, 1.5]), requires_grad=True)
    h = x.tanh()
    y = (h * 3.0 + h.exp()).sum()
    y.backward()
    t = np.tanh(x.data)
    np.testing.assert_allclose(x.grad, (3 + np.exp(t)) * (1 - t * t), rtol=1e-14)


def test_grads_accumulate_across_backward_calls_and_zero_grad():
    x = Tensor(np.ones(3), requires_grad=True)
    (x * 2.0).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(3, 5.0))
    x.zero_grad()
    assert x.grad is None


def test_pass_through_gradient_is_not_aliased_between_leaves():
    # add passes the same gradient array to both inputs: in-place accumulation into one
    # leaf's .grad must not change the other's.
    a = Tensor(np.ones(3), requires_grad=True)
    b = Tensor(np.ones(3), requires_grad=True)
    (a + b).sum().backward()
    (a * 5.0).sum().backward()
    np.testing.assert_array_equal(a.grad, np.full(3, 6.0))
    np.testing.assert_array_equal(b.grad, np.ones(3))


def test_second_backward_through_freed_buffers_raises():
    x = Tensor(np.ones(3), requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.copy()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * first)


def test_no_grad_records_nothing():
    x = Tensor(np.ones(3), requires_grad=True)
    with mg.no_grad():
        y = x.exp()
        with mg.enable_grad():
            z = x.exp()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None
    assert mg.is_grad_enabled()


def test_backward_needs_scalar_or_grad():
    x = Tensor(np.ones(3), requires_grad=True)
    y = x * 2.0
    with pytest.raises(RuntimeError, match="scalar"):
        y.backward()
    y.backward(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor(np.ones(1)).backward()


def test_dtypes():
    assert Tensor([1.0, 2.0]).dtype == np.float32  # Python floats: float32, as in torch
    assert Tensor(np.zeros(2)).dtype == np.float64  # arrays keep their dtype
    a = np.zeros(2, np.float32)
    assert Tensor(a).data is a  # shared, like torch.from_numpy
    with pytest.raises(ValueError, match="floating-point"):
        Tensor(np.array([1, 2]), requires_grad=True)


def test_scalar_constants_keep_dtype_and_reflected_ops():
    x = Tensor(np.ones(2, np.float32), requires_grad=True)
    y = 2.0 - x * 3.0 / 2.0 + 1.0
    y = 1.0 / (y + 4.0)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, 1.5 / (2.0 - 1.5 + 1.0 + 4.0) ** 2, rtol=1e-6)


def test_custom_function():
    class Square(mg.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    x = Tensor(np.array([3.0]), requires_grad=True)
    Square.apply(x).sum().backward()
    assert x.grad[0] == 6.0
    assert Square.name() == "square"


def test_deep_chain_has_no_recursion_limit():
    x = Tensor(np.ones(2), requires_grad=True)
    h = x
    for _ in range(3000):
        h = h * 1.0
    h.sum().backward()
    np.testing.assert_array_equal(x.grad, np.ones(2))


def test_repr_and_properties():
    x = Tensor(np.zeros((2, 3)), requires_grad=True)
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6 and len(x) == 2 and x.nbytes == 48
    assert "requires_grad=True" in repr(x)
    assert "grad_fn=mul" in repr(x * 2.0)
    assert x.detach().data is x.data and not x.detach().requires_grad


def test_retain_grad_on_non_leaf():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    h = x * 3.0
    h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_array_equal(h.grad, 2 * h.data)
    np.testing.assert_array_equal(x.grad, 6 * h.data)


def test_parameter_data_assignment_keeps_role_and_checks_shape():
    from minigrad import nn
    p = nn.Parameter(np.zeros(3))
    before = mg.memory.live_bytes()["parameters"]
    p.data = np.ones(3)
    assert mg.memory.live_bytes()["parameters"] == before
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        p.data = np.ones(2)
    assert p.shape == (3,)
