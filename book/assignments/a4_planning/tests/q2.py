from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=1, hidden=False)
def test_brute_force_small(brute_force_plan):
    a, m, c = ([10] * 7, [10] * 6, [1] * 6)
    got = brute_force_plan(a, m, c, 70)
    assert got is not None and got[0] == 0, f'a budget of 70 fits the plan [0] (no recomputation); got {got!r}'
    got = brute_force_plan(a, m, c, 50)
    assert got is not None and got[0] == 3, f'with a budget of 50 the cheapest plan recomputes 3 layers ([0, 3]); got {got!r}'
    got = brute_force_plan(a, m, c, 40)
    assert got is not None and got[0] == 5, f'with a budget of 40 the only plan that fits is [0, 3, 5], which recomputes 5 layers; got {got!r}'
    assert brute_force_plan(a, m, c, 39) is None, 'no plan fits a budget of 39: brute_force_plan must return None'

