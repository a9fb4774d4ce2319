from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=1, hidden=False)
def test_tanh_values(Tanh):
    import numpy as np
    from minigrad import Tensor
    a0 = np.array([-1.0, 0.0, 0.5, 2.0])
    a = Tensor(a0, requires_grad=True)
    try:
        y = Tanh.apply(a)
    except Exception as e:
        raise AssertionError(f'Tanh.apply(a) failed with {type(e).__name__}: {e} (does forward return tanh(a)?)') from None
    assert np.allclose(y.data, np.tanh(a0)), f'Tanh.forward returned {y.data}, expected {np.tanh(a0)}'
    y.backward(np.ones(4))
    assert a.grad is not None and np.allclose(a.grad, 1 - np.tanh(a0) ** 2), f'gradient {a.grad}, expected 1 - tanh(a)^2 = {1 - np.tanh(a0) ** 2}'

