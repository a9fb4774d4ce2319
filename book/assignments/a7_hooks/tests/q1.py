from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 8

@test_case(points=1, hidden=False)
def test_one_segment_matches_the_plain_run(hook_checkpoint, make_chain, run_plain, gradients):
    import minigrad
    from minigrad import Tensor
    from minigrad.testing import assert_answer
    layers = make_chain(3, 8)
    x = Tensor(minigrad.random.randn(4, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    got, _ = gradients(layers, x, lambda ls, h: run_plain(ls[2:], hook_checkpoint(lambda u: run_plain(ls[:2], u), h)))
    assert_answer('grads', got, plain, compare='close', atol=1e-06, msg='3 blocks of width 8, the first two in hook_checkpoint: the gradients of x and of every parameter')
    try:
        from grading import kit
    except ImportError:
        return
    big = Tensor(minigrad.random.randn(64, 8), requires_grad=True)
    before = kit.live_float_arrays()
    y = hook_checkpoint(lambda u: run_plain(layers[:2], u), big)
    assert_answer('held', kit.bytes_held_since(before, y), 0, msg='the first two of 3 blocks in hook_checkpoint, a batch of 64: bytes still held after its forward pass besides its output, in any form (arrays, copies, bytes, text)')

