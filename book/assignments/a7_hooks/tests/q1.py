from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 7

@test_case(points=1, hidden=False)
def test_one_segment_matches_the_plain_run(hook_checkpoint, make_chain, run_plain, gradients):
    import numpy as np
    import minigrad
    from minigrad import Tensor
    layers = make_chain(3, 8)
    x = Tensor(minigrad.random.randn(4, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    try:
        got, _ = gradients(layers, x, lambda ls, h: run_plain(ls[2:], hook_checkpoint(lambda u: run_plain(ls[:2], u), h)))
    except Exception as e:
        raise AssertionError(f'hook_checkpoint(fn, x) followed by backward failed with {type(e).__name__}: {e}') from None
    assert all((np.allclose(p, q, atol=1e-06) for p, q in zip(plain, got))), "with the first two blocks in hook_checkpoint, the gradients differ from the plain run's"

