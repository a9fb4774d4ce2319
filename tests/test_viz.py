"""minigrad.viz: figures from plans and ledgers (tests/test_imports.py checks that `import minigrad` loads no matplotlib)."""

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from minigrad import plan as P  # noqa: E402
from minigrad import viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_byte_unit():
    assert viz.byte_unit(100) == ("bytes", 1.0)
    assert viz.byte_unit(2048) == ("KiB", 1024.0)
    assert viz.byte_unit(5 * 1024**2) == ("MiB", 1024.0**2)


def test_schedule_steps_one_level():
    plan = P.explicit(6, [0, 2, 4])
    kinds, layers, states = viz.schedule_steps(plan)
    # forward: 4 untaped + 2 taped; backward: 2 reversed, then 2 x (2 taped + 2 reversed)
    assert kinds.count("forward") == 4 and kinds.count("taped") == 6 and kinds.count("backward") == 6
    assert states.shape == (len(kinds), 6)
    # at the end of forward the two checkpointed inputs and the last segment are alive
    t_end = kinds.index("backward")
    assert list(states[t_end]) == [1, 0, 1, 0, 2, 2]
    # while segment [2, 4) is recomputed, segment [4, 6) is gone
    t = [i for i, (k, l) in enumerate(zip(kinds, layers)) if k == "taped" and l == 3][0]
    assert list(states[t]) == [1, 0, 2, 2, 0, 0]
    assert states[-1].sum() == 2  # only layer 0 alive when the last backward step runs


def test_schedule_steps_revolve_never_exceeds_slots():
    for n, s in [(10, 2), (17, 3), (30, 4)]:
        kinds, layers, states = viz.schedule_steps(P.revolve(n, s))
        assert (states == 1).sum(axis=1).max() <= s
        assert (states == 2).sum(axis=1).max() == 1  # one taped layer at a time
        assert kinds.count("forward") == P.revolve(n, s).n_untaped_forward_steps


def test_schedule_diagram_labels():
    ax = viz.schedule_diagram(P.revolve(12, 3))
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "layer"
    assert "12 layers" in ax.get_title() and "3 slots" in ax.get_title()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "saved activations" in texts and "checkpointed input" in texts
    ax2 = viz.schedule_diagram(P.sqrt_segments(16))
    assert "[0, 4, 8, 12]" in ax2.get_title()


def test_pareto_front_and_frontier():
    pts = [(0, 100), (5, 60), (6, 80), (10, 40), (12, 40), (20, 10)]
    assert viz.pareto_front(pts) == [(0, 100), (5, 60), (10, 40), (20, 10)]
    ax = viz.frontier([(c, p * 1024) for c, p in pts])
    assert "KiB" in ax.get_ylabel()
    assert ax.get_title() and ax.get_xlabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["plans", "Pareto front"]
    with pytest.raises(ValueError, match="at least one"):
        viz.frontier([])


def test_frontier_from_profile_points():
    pr = P.ChainProfile(input_bytes=(4096,) * 8, output_bytes=4096, saves_input=(True,) * 8,
                        saves_output=(False,) * 8, own_bytes=(8192,) * 8, cost=(3,) * 8)
    pts = P.min_peak_for_each_last_start(pr)
    ax = viz.frontier(pts)
    # the frontier's points are the plotted red markers; costs ascend, peaks descend
    front = viz.pareto_front(pts)
    assert all(a[0] < b[0] and a[1] > b[1] for a, b in zip(front, front[1:]))
    assert len(ax.collections) >= 2


def test_timeline_of_a_checkpointed_step():
    import minigrad
    from minigrad import memory, nn
    from minigrad.checkpoint import checkpoint_sequential

    minigrad.random.manual_seed(0)
    layers = [nn.Linear(64, 64) if i % 2 == 0 else nn.ReLU() for i in range(8)]
    x = minigrad.Tensor(np.ones((32, 64), np.float32), requires_grad=True)
    with memory.track() as m:
        y = checkpoint_sequential(layers, [0, 4], x)
        y.sum().backward()
    ax = viz.timeline(m, categories=["parameters", "gradients", "activations", "temporaries"])
    assert ax.get_ylabel() == "live memory (KiB)"
    assert ax.get_title() and "event" in ax.get_xlabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:4] == ["parameters", "gradients", "activations", "temporaries"]
    assert "recompute phase" in labels and "backward phase" in labels
    # the stacked top at the last event equals the ledger's total for those categories
    ys = ax.collections[-1].get_paths()[0].vertices[:, 1]
    assert np.isclose(ys.max(), max(sum(ev.live[c] for c in labels[:4]) for ev in m.timeline) / 1024)
    with pytest.raises(ValueError, match="unknown categories"):
        viz.timeline(m, categories=["weights"])


def test_timeline_needs_events():
    from minigrad import memory

    with memory.track() as m:
        pass
    with pytest.raises(ValueError, match="timeline is empty"):
        viz.timeline(m)
