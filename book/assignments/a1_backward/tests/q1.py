from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 2

@test_case(points=1, hidden=False)
def test_mul_small(Mul):
    import numpy as np
    from minigrad import Tensor
    a = Tensor(np.array([[1.0, 2.0, 3.0]]), requires_grad=True)
    b = Tensor(np.array([[4.0, 5.0, 6.0]]), requires_grad=True)
    try:
        y = Mul.apply(a, b)
    except Exception as e:
        raise AssertionError(f'Mul.apply(a, b) failed with {type(e).__name__}: {e} (does forward return the product?)') from None
    assert np.array_equal(y.data, [[4.0, 10.0, 18.0]]), f'Mul.forward returned {y.data}, expected [[4, 10, 18]]'
    try:
        y.backward(np.array([[1.0, 10.0, 100.0]]))
    except Exception as e:
        raise AssertionError(f'backward through Mul failed with {type(e).__name__}: {e} (does backward return one gradient per input, each shaped like its input?)') from None
    assert a.grad is not None and np.array_equal(a.grad, [[4.0, 50.0, 600.0]]), f'gradient of a is {a.grad}, expected g * b = [[4, 50, 600]]'
    assert b.grad is not None and np.array_equal(b.grad, [[1.0, 20.0, 300.0]]), f'gradient of b is {b.grad}, expected g * a = [[1, 20, 300]]'

