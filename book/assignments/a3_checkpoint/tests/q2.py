from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 6

@test_case(points=1, hidden=False)
def test_two_segments_match_the_plain_run(my_checkpoint_sequential, make_chain, run_plain, gradients):
    import minigrad
    from minigrad import Tensor
    from minigrad.testing import REFERENCE, assert_answer
    layers = make_chain(4, 8)
    x = Tensor(minigrad.random.randn(5, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    ckpt, m = gradients(layers, x, lambda ls, h: my_checkpoint_sequential(ls, [0, 2], h))
    assert_answer('grads', ckpt, plain, msg="starts [0, 2] on 4 blocks: the gradients (the plain run's, bit for bit)")
    assert_answer('peak', m.peak_increase['activations'], REFERENCE, msg='starts [0, 2] on 4 blocks: the peak of saved activations (bytes), checkpointing as described')

