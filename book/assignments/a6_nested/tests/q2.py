from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 5

@test_case(points=1, hidden=False)
def test_peak_of_the_plain_and_one_level_runs(nested_peak, one_level, taped):
    from minigrad.testing import assert_answer
    a = [10, 20, 10, 20, 10]
    assert_answer('plain', nested_peak(a, taped(0, 4)), 70, msg=f'a = {a}, the plain run (it keeps every activation)')
    assert_answer('one_level', nested_peak(a, one_level(4, [0, 2])), 50, msg=f'a = {a}, starts [0, 2] (the end of the forward pass holds x0, x2, x3 and x4, more than the recomputation of the first segment)')

