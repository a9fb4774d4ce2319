from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 7

@test_case(points=1, hidden=False)
def test_checkpoint_one_segment(Checkpoint, make_chain, run_plain, gradients):
    import minigrad
    from minigrad import Tensor, memory
    from minigrad.testing import assert_answer
    layers = make_chain(3, 8)
    x = Tensor(minigrad.random.randn(4, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    try:
        ckpt, _ = gradients(layers, x, lambda ls, h: Checkpoint.apply(h, lambda t: run_plain(ls, t)))
    except Exception as e:
        raise AssertionError(f'Checkpoint.apply(x, fn) followed by backward failed with {type(e).__name__}: {e}') from None
    assert_answer('grads', ckpt, plain, compare='close', atol=1e-06, msg='the whole chain of 3 blocks in one Checkpoint: the gradients of x and the parameters')
    with memory.track() as m:
        Checkpoint.apply(x, lambda t: run_plain(layers, t))
    assert_answer('kept', m.peak_increase['activations'], x.nbytes, msg=f'the forward pass of the checkpointed chain keeps only its input ({x.nbytes} bytes) at its peak')
    try:
        from grading import kit
    except ImportError:
        return
    big = Tensor(minigrad.random.randn(64, 8), requires_grad=True)
    before = kit.live_float_arrays()
    y = Checkpoint.apply(big, lambda t: run_plain(layers, t))
    assert_answer('held', kit.bytes_held_since(before, y), 0, msg='the whole chain of 3 blocks in one Checkpoint, a batch of 64: bytes still held after its forward pass besides its output, in any form (arrays, copies, bytes, text)')

