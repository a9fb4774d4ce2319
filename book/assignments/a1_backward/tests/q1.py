from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 2

@test_case(points=1, hidden=False)
def test_mul_small(Mul):
    import numpy as np
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    a = Tensor(np.array([[1.0, 2.0, 3.0]]), requires_grad=True)
    b = Tensor(np.array([[4.0, 5.0, 6.0]]), requires_grad=True)
    try:
        y = Mul.apply(a, b)
    except Exception as e:
        raise AssertionError(f'Mul.apply(a, b) failed with {type(e).__name__}: {e} (does forward return the product?)') from None
    assert_answer('forward', y.data.copy(), np.array([[4.0, 10.0, 18.0]]), msg='Mul.forward of [[1, 2, 3]] and [[4, 5, 6]]')
    try:
        y.backward(np.array([[1.0, 10.0, 100.0]]))
    except Exception as e:
        raise AssertionError(f'backward through Mul failed with {type(e).__name__}: {e} (does backward return one gradient per input, each shaped like its input?)') from None
    assert_answer('grad_a', None if a.grad is None else a.grad.copy(), np.array([[4.0, 50.0, 600.0]]), msg='g = [[1, 10, 100]]: the gradient of a (g * b)')
    assert_answer('grad_b', None if b.grad is None else b.grad.copy(), np.array([[1.0, 20.0, 300.0]]), msg='g = [[1, 10, 100]]: the gradient of b (g * a)')

