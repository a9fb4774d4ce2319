from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 6

@test_case(points=1, hidden=False)
def test_nested_matches_the_plain_run(run_nested, make_blocks, run_plain, gradients):
    import numpy as np
    import minigrad
    from minigrad import Tensor
    layers = make_blocks([8, 12, 8, 12, 8])
    x = Tensor(minigrad.random.randn(3, 8), requires_grad=True)
    plain, _ = gradients(layers, x, run_plain)
    items = [('ckpt', 0, 3, [('ckpt', 0, 2, [('taped', 0), ('taped', 1)]), ('taped', 2)]), ('taped', 3)]
    got, _ = gradients(layers, x, lambda ls, h: run_nested(ls, items, h))
    assert all((np.array_equal(p, q) for p, q in zip(plain, got))), f'the schedule {items} gives other gradients than the plain run'

