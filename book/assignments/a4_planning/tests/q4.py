from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 3

@test_case(points=1, hidden=False)
def test_chain_profile_shapes(chain_profile):
    from minigrad.testing import assert_answer
    a, m, c = chain_profile([4, 8, 2], 3)
    assert_answer('a', [int(v) for v in a], [48, 96, 24], msg='widths [4, 8, 2], batch 3: a (bytes)')
    assert_answer('m', [int(v) for v in m], [96, 24], msg='widths [4, 8, 2], batch 3: m (bytes)')
    assert_answer('c', [int(v) for v in c], [192, 96], msg='widths [4, 8, 2], batch 3: c (FLOPs)')

