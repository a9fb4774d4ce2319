from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 6

@test_case(points=1, hidden=False)
def test_optimal_plan_small(optimal_plan, segment_peak):
    from minigrad.testing import assert_answer
    a, m, c = ([10] * 7, [10] * 6, [1] * 6)
    for budget, cost, why in [(50, 3, 'the cheapest plan recomputes 3 layers'), (40, 5, 'the only plan that fits, [0, 3, 5], recomputes 5 layers'), (39, None, 'no plan fits: optimal_plan returns None')]:
        got = optimal_plan(a, m, c, budget)
        assert_answer(f'cost[{budget}]', None if got is None else got[0], cost, msg=f'uniform chain of 6 layers, budget {budget} ({why}): the cost')
        if got is not None:
            assert_answer(f'fits[{budget}]', segment_peak(a, m, list(got[1])) <= budget, True, msg=f'uniform chain, budget {budget}: your plan {got[1]} fits the budget')

