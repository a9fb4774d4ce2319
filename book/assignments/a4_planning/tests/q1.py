from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 3

@test_case(points=1, hidden=False)
def test_segment_peak_uniform_chain(segment_peak):
    from minigrad.testing import assert_answer
    n = 6
    a, m = ([10] * (n + 1), [10] * n)
    for starts, expected in [([0], 70), ([0, 3], 50), ([0, 2, 4], 50), ([0, 3, 5], 40)]:
        assert_answer(f'peak{starts}', segment_peak(a, m, starts), expected, msg=f'uniform chain of 6 layers, 10 bytes each, starts {starts}: the peak')

