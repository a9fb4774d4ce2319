from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 3

@test_case(points=1, hidden=False)
def test_brute_force_small(brute_force_plan):
    from minigrad.testing import assert_answer
    a, m, c = ([10] * 7, [10] * 6, [1] * 6)
    for budget, cost, why in [(70, 0, 'the plan [0] fits (no recomputation)'), (50, 3, 'the cheapest plan recomputes 3 layers ([0, 3])'), (40, 5, 'the only plan that fits is [0, 3, 5], which recomputes 5 layers'), (39, None, 'no plan fits: brute_force_plan returns None')]:
        got = brute_force_plan(a, m, c, budget)
        assert_answer(f'cost[{budget}]', None if got is None else got[0], cost, msg=f'uniform chain of 6 layers, budget {budget} ({why}): the cost')

