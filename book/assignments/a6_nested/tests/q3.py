from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 3

@test_case(points=1, hidden=False)
def test_recompute_of_one_level(nested_recompute, one_level, taped):
    c = [1, 2, 3, 4, 5]
    assert nested_recompute(c, taped(0, 5)) == 0, 'the plain run recomputes nothing'
    got = nested_recompute(c, one_level(5, [0, 2, 4]))
    assert got == 10, f'starts [0, 2, 4]: blocks 0 to 3 run again, cost 1 + 2 + 3 + 4 = 10; you said {got!r}'

