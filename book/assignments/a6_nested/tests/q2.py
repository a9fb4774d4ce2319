from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 5

@test_case(points=1, hidden=False)
def test_peak_of_the_plain_and_one_level_runs(nested_peak, one_level, taped):
    a = [10, 20, 10, 20, 10]
    got = nested_peak(a, taped(0, 4))
    assert got == 70, f'the plain run keeps every activation: 70 bytes, you predicted {got!r}'
    got = nested_peak(a, one_level(4, [0, 2]))
    assert got == 50, f'starts [0, 2]: the end of the forward pass holds x0, x2, x3 and x4, 50 bytes (more than the recomputation of the first segment); you predicted {got!r}'

