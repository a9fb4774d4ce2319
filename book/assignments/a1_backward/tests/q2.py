from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=1, hidden=False)
def test_tanh_values(Tanh):
    import numpy as np
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    a0 = np.array([-1.0, 0.0, 0.5, 2.0])
    a = Tensor(a0, requires_grad=True)
    try:
        y = Tanh.apply(a)
    except Exception as e:
        raise AssertionError(f'Tanh.apply(a) failed with {type(e).__name__}: {e} (does forward return tanh(a)?)') from None
    assert_answer('forward', y.data.copy(), np.tanh(a0), compare='close', rtol=1e-12, msg=f'Tanh.forward of {a0}')
    y.backward(np.ones(4))
    assert_answer('grad', None if a.grad is None else a.grad.copy(), 1 - np.tanh(a0) ** 2, compare='close', rtol=1e-09, msg=f'Tanh.backward at {a0}, g = 1: the gradient (1 - tanh(a)^2)')

