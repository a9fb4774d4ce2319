from otter.test_files import test_case

OK_FORMAT = False

name = "q5"
points = 3

@test_case(points=1, hidden=False)
def test_saved_bytes_of_square(saved_bytes):
    import numpy as np
    from minigrad import Function, Tensor
    from minigrad.testing import assert_answer

    class Square(Function):

        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, grad):
            a, = ctx.saved_tensors
            return grad * 2 * a
    x = Tensor(np.zeros((10, 10), dtype=np.float32), requires_grad=True)
    assert_answer('square', saved_bytes(Square.apply, x), 400, msg='saved_bytes of Square, which keeps its (10, 10) float32 input (400 bytes)')

