from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 5

@test_case(points=1, hidden=False)
def test_numerical_grad_of_a_quadratic(numerical_grad):
    import numpy as np
    from minigrad.testing import assert_answer
    x = np.array([1.0, -2.0, 0.5])
    g = numerical_grad(lambda v: float(np.sum(v ** 2)), x)
    assert_answer('grad', np.asarray(g, dtype=np.float64), 2 * x, compare='close', atol=1e-06, msg='numerical_grad of sum(x^2) at [1, -2, 0.5] (2x)')
    assert_answer('x_after', x, np.array([1.0, -2.0, 0.5]), msg='x after numerical_grad (unchanged)')

@test_case(points=1, hidden=False)
def test_gradcheck_accepts_a_correct_op(gradcheck):
    import numpy as np
    import minigrad.ops as F
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    x = Tensor(np.array([[0.3, -0.7], [1.1, 0.0]]), requires_grad=True)
    assert_answer('tanh', gradcheck(F.tanh, x), True, msg="gradcheck of minigrad's tanh, whose gradient is right")

