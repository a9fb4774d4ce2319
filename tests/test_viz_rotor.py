"""Drawing nested schedules and frontiers (minigrad.viz); matplotlib stays out of
`minigrad.plan.rotor` and the published model."""

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

import minigrad  # noqa: E402
from minigrad import nn, viz  # noqa: E402
from minigrad import plan as P  # noqa: E402
from bookkit.schedule_comparison import plan_families  # noqa: E402
from minigrad.plan.nested import from_revolve  # noqa: E402
from minigrad.plan import NestedSchedule, revolve  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_nested_intervals_follow_the_steps():
    s = NestedSchedule.from_nested(5, [(0, 3, [(0, 1, [0]), 1, 2]), 3, 4])
    kinds, layers, states = viz.schedule_steps(s)
    # forward: 3 untaped + 2 taped; backward of 4, 3; then [0, 3) rebuilt: 1 untaped,
    # 2 taped, 2 reversed, then [0, 1) rebuilt: 1 taped, 1 reversed
    assert kinds == ["forward"] * 3 + ["taped"] * 2 + ["backward"] * 2 + \
        ["forward", "taped", "taped", "backward", "backward", "taped", "backward"]
    assert viz.nested_intervals(s) == [(7, 13, 0, 3, 1), (12, 13, 0, 1, 2)]
    for first, last, start, stop, level in viz.nested_intervals(s):
        # inside its frame every step runs a layer of the checkpoint's range
        assert all(start <= layers[t] < stop for t in range(first, last + 1))
    # the schedule's input is held (blue) from the first step until its last backward
    assert (states[:, 0] >= 1).all()


def test_nested_intervals_of_a_schedule_1000_levels_deep():
    import sys
    n = 1000
    spec = [n - 1]
    for i in reversed(range(1, n - 1)):  # checkpoint [i, n): tape i, nest the rest
        spec = [(i, n, [i] + spec)]
    s = NestedSchedule.from_nested(n, [0] + spec)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # well below the nesting
    try:
        frames = viz.nested_intervals(s)
    finally:
        sys.setrecursionlimit(old)
    assert sorted((a, b, lv) for _, _, a, b, lv in frames) == \
        sorted(s.checkpoints)
    # each level's frame lies inside the one of the level above and ends a step
    # before it; the top one ends just before layer 0's reversal, the step's
    # last (steps: n forward, n reversed, checkpoint [i, n) re-runs n - i layers)
    frames.sort(key=lambda f: f[4])
    assert frames[0][1] == 2 * n + sum(n - i for i in range(1, n - 1)) - 2
    for (f0, l0, *_), (f1, l1, *_) in zip(frames, frames[1:]):
        assert f0 < f1 <= l1 == l0 - 1  # then layer i reversed


def test_nested_schedule_diagram_frames_every_checkpoint():
    minigrad.random.manual_seed(0)
    layers = [nn.Linear(6, 6) if i % 2 == 0 else nn.Tanh() for i in range(10)]
    x = minigrad.Tensor(np.ones((3, 6), np.float32), requires_grad=True)
    s = P.rotor(layers, x)
    assert s.depth >= 2
    ax = viz.nested_schedule_diagram(s)
    frames = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert len(frames) == len(s.checkpoints)
    assert "depth" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    # each level is named once, in the legend (frame colours), not inside the frames
    assert all(f"recomputation, level {lv}" in legend for lv in range(1, s.depth + 1))
    assert "saved activations" in legend and not ax.texts
    # a Revolve schedule draws the same grid through its nested form
    rev = from_revolve(revolve(10, 3))
    _, _, a = viz.schedule_steps(rev)
    _, _, b = viz.schedule_steps(revolve(10, 3))
    assert np.array_equal(a, b)


def test_frontier_families_plot():
    minigrad.random.manual_seed(1)
    layers = [nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4), nn.Tanh(), nn.Linear(4, 12), nn.GELU(),
              nn.Linear(12, 4), nn.ReLU()]
    x = minigrad.Tensor(np.ones((2, 4), np.float32), requires_grad=True)
    families = plan_families(P.profile_chain(layers, x, cost="ops"))
    assert set(families) == {"store all", "sqrt(n)", "segment plans", "Revolve", "rotor"}
    assert len(families["Revolve"]) == len(layers) - 1
    # rotor's front is never above any other family's point of no more work
    for name, pts in families.items():
        for cost, peak, _ in pts:
            assert min(p for c, p, _ in families["rotor"] if c <= cost) <= peak, name
    ax = viz.frontier_families(families, xlabel="recomputed ops")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["store all", "sqrt(n)", "segment plans", "Revolve", "rotor", "Pareto front (all plans)"]
    assert ax.get_xlabel() == "recomputed ops"
    with pytest.raises(ValueError, match="at least one"):
        viz.frontier_families({"rotor": []})
