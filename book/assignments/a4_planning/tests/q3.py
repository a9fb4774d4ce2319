from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 6

@test_case(points=1, hidden=False)
def test_optimal_plan_small(optimal_plan, segment_peak):
    a, m, c = ([10] * 7, [10] * 6, [1] * 6)
    got = optimal_plan(a, m, c, 50)
    assert got is not None and got[0] == 3, f'budget 50 on the uniform chain: the cheapest plan recomputes 3 layers; got {got!r}'
    assert segment_peak(a, m, got[1]) <= 50, f'the plan {got[1]} has a peak above the budget'
    got = optimal_plan(a, m, c, 40)
    assert got is not None and got[0] == 5, f'budget 40: the only plan that fits, [0, 3, 5], recomputes 5 layers; got {got!r}'
    assert optimal_plan(a, m, c, 39) is None, 'no plan fits a budget of 39: optimal_plan must return None'

