from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=1, hidden=False)
def test_by_shape_of_two_ops(saved_by_shape):
    import torch
    from minigrad.testing import assert_answer
    x = torch.randn(5, 6, requires_grad=True)
    got = saved_by_shape(lambda t: torch.tanh(t).sum(dim=0).exp(), x)
    assert_answer('by_shape', sorted(([list(k), v] for k, v in got.items())), [[[5, 6], 120], [[6], 24]], msg='tanh then sum then exp on a (5, 6) x (tanh keeps a (5, 6) output, exp a (6,) one): [[shape, bytes], ...] sorted')

