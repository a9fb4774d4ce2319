from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=1, hidden=False)
def test_by_shape_of_two_ops(saved_by_shape):
    import torch
    x = torch.randn(5, 6, requires_grad=True)
    got = saved_by_shape(lambda t: torch.tanh(t).sum(dim=0).exp(), x)
    assert got == {(5, 6): 120, (6,): 24}, f'tanh keeps a (5, 6) output and exp a (6,) output: expected {{(5, 6): 120, (6,): 24}}, got {got!r}'

