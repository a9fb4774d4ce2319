from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 3

@test_case(points=1, hidden=False)
def test_matmul_small(MatMul):
    import numpy as np
    from minigrad import Tensor
    a = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    b = Tensor(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 3.0]]), requires_grad=True)
    try:
        y = MatMul.apply(a, b)
    except Exception as e:
        raise AssertionError(f'MatMul.apply(a, b) failed with {type(e).__name__}: {e} (does forward return a @ b?)') from None
    assert np.array_equal(y.data, [[1.0, 2.0, 8.0], [3.0, 4.0, 18.0]]), f'MatMul.forward returned {y.data}'
    try:
        y.backward(np.ones((2, 3)))
    except Exception as e:
        raise AssertionError(f'backward through MatMul failed with {type(e).__name__}: {e} (with A (2, 2), B (2, 3) and G (2, 3): G @ B.T is (2, 2) like A, A.T @ G is (2, 3) like B)') from None
    assert a.grad is not None and a.grad.shape == (2, 2), f'gradient of A has shape {(None if a.grad is None else a.grad.shape)}, expected (2, 2)'
    assert np.array_equal(a.grad, [[3.0, 4.0], [3.0, 4.0]]), f'gradient of A is {a.grad}, expected G @ B.T'
    assert np.array_equal(b.grad, [[4.0, 4.0, 4.0], [6.0, 6.0, 6.0]]), f'gradient of B is {b.grad}, expected A.T @ G'

