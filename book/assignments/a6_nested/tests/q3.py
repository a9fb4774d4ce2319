from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 3

@test_case(points=1, hidden=False)
def test_recompute_of_one_level(nested_recompute, one_level, taped):
    from minigrad.testing import assert_answer
    c = [1, 2, 3, 4, 5]
    assert_answer('plain', nested_recompute(c, taped(0, 5)), 0, msg=f'c = {c}, the plain run (it recomputes nothing)')
    assert_answer('one_level', nested_recompute(c, one_level(5, [0, 2, 4])), 10, msg=f'c = {c}, starts [0, 2, 4] (blocks 0 to 3 run again: 1 + 2 + 3 + 4)')

