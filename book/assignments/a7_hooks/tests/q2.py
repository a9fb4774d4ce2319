from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 5

@test_case(points=1, hidden=False)
def test_two_segments(hook_checkpoint_sequential, make_chain, run_plain, gradients):
    import minigrad
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    layers = make_chain(4, 8)
    x = Tensor(minigrad.random.randn(5, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    got, _ = gradients(layers, x, lambda ls, h: hook_checkpoint_sequential(ls, [0, 2], h))
    assert_answer('grads', got, plain, msg="starts [0, 2] on 4 blocks of width 8: the gradients (bit for bit the plain run's)")

