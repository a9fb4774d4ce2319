from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 5

@test_case(points=1, hidden=False)
def test_numerical_grad_of_a_quadratic(numerical_grad):
    import numpy as np
    x = np.array([1.0, -2.0, 0.5])
    g = numerical_grad(lambda v: float(np.sum(v ** 2)), x)
    assert np.allclose(g, 2 * x, atol=1e-06), f'numerical_grad of sum(x^2) at {x} is {g}, expected 2x = {2 * x}'
    assert np.array_equal(x, [1.0, -2.0, 0.5]), f'numerical_grad changed its input: x is now {x}'

@test_case(points=1, hidden=False)
def test_gradcheck_accepts_a_correct_op(gradcheck):
    import numpy as np
    import minigrad.ops as F
    from minigrad import Tensor
    x = Tensor(np.array([[0.3, -0.7], [1.1, 0.0]]), requires_grad=True)
    result = gradcheck(F.tanh, x)
    assert isinstance(result, (bool, np.bool_)), f'gradcheck must return True or False, got {result!r}'
    assert result, "gradcheck rejected minigrad's tanh, whose gradient is right"

