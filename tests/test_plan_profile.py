"""`profile_chain` and the planners' one adapter (`as_profile`): a dry run that leaves the
model as it found it, and costs checked by name."""
import numpy as np
import pytest


def test_profiling_is_a_dry_run_too():
    """profile_chain (what rotor and optimal_one_level run on layers) leaves BatchNorm's
    statistics and every Generator alive before it as it found them."""
    import minigrad
    from minigrad import Tensor, nn
    from minigrad import plan as P

    gen = minigrad.random.Generator(4)
    bn = nn.BatchNorm1d(8)

    class Drop:
        def __call__(self, h):
            return minigrad.ops.dropout(h, 0.5, generator=gen)

    layers = [nn.Sequential(nn.Linear(8, 8), bn), Drop(), nn.Linear(8, 8)]
    x = Tensor(np.arange(32, dtype=np.float32).reshape(4, 8), requires_grad=True)
    state = (gen.get_state(), bn.running_mean.data.copy(), bn.num_batches_tracked)
    P.rotor(layers, x)
    P.optimal_one_level(layers, x)
    assert gen.get_state() == state[0]
    assert np.array_equal(bn.running_mean.data, state[1]) and bn.num_batches_tracked == state[2]


@pytest.mark.parametrize("planner", ["rotor", "optimal_one_level", "optimal_segments"])
def test_every_planner_takes_any_real_costs_and_names_itself_in_cost_errors(planner):
    from minigrad import Tensor, nn
    from minigrad import plan as P

    layers = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(3)]
    x = Tensor(np.ones((2, 4), np.float32), requires_grad=True)
    plan = getattr(P, planner)
    for where in ((layers, x), (P.profile_chain(layers, x),)):
        halves = plan(*where, cost=[np.float32(0.5)] * 3).recompute_cost
        assert halves == plan(*where, cost=[0.5] * 3).recompute_cost
        assert plan(*where, cost=None).recompute_cost == plan(*where).recompute_cost
        for bad, kind, msg in (([1, 2], ValueError, "cost has 2 entries"),
                               ([np.True_] * 3, TypeError, "must be a number"),
                               ([10 ** 400] * 3, ValueError, "too large"),
                               ([1, float("nan"), 1], ValueError, "finite number >= 0")):
            with pytest.raises(kind, match=f"{planner}: cost.*{msg}|{planner}: {msg}"):
                plan(*where, cost=bad)
