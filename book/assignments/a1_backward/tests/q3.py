from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 3

@test_case(points=1, hidden=False)
def test_matmul_small(MatMul):
    import numpy as np
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    a = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    b = Tensor(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 3.0]]), requires_grad=True)
    try:
        y = MatMul.apply(a, b)
    except Exception as e:
        raise AssertionError(f'MatMul.apply(a, b) failed with {type(e).__name__}: {e} (does forward return a @ b?)') from None
    assert_answer('forward', y.data.copy(), np.array([[1.0, 2.0, 8.0], [3.0, 4.0, 18.0]]), msg='MatMul.forward, A (2, 2) @ B (2, 3)')
    try:
        y.backward(np.ones((2, 3)))
    except Exception as e:
        raise AssertionError(f'backward through MatMul failed with {type(e).__name__}: {e} (with A (2, 2), B (2, 3) and G (2, 3): G @ B.T is (2, 2) like A, A.T @ G is (2, 3) like B)') from None
    assert_answer('grad_a', None if a.grad is None else a.grad.copy(), np.array([[3.0, 4.0], [3.0, 4.0]]), msg='G = ones: the gradient of A (G @ B.T)')
    assert_answer('grad_b', None if b.grad is None else b.grad.copy(), np.array([[4.0, 4.0, 4.0], [6.0, 6.0, 6.0]]), msg='G = ones: the gradient of B (A.T @ G)')

