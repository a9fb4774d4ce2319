"""The byte ledger: exact counts against nbytes computed here, growth laws, op counts."""
import gc
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, nn, optim
from minigrad.checkpoint import checkpoint_sequential

@pytest.fixture(autouse=True)
def collect_garbage():
    # Graphs kept alive by reference cycles elsewhere (an exception's traceback in an
    # earlier test) would be freed at an arbitrary moment inside a tracked region and
    # shift its peak relative to its start; collect them before each test.
    gc.collect()
    yield


B, D = 8, 16
ARR = B * D * 8  # bytes of one (B, D) float64 activation


def layer():
    # Linear saves its input, Tanh its output: per layer one new saved (B, D) array.
    return nn.Sequential(nn.Linear(D, D, dtype=np.float64), nn.Tanh())


def chain(n, seed=0):
    mg.random.manual_seed(seed)
    return [layer() for _ in range(n)]


def run(layers, segments=None, seed=1):
    x = Tensor(np.random.default_rng(seed).standard_normal((B, D)))
    with mg.memory.track() as m:
        h = checkpoint_sequential(layers, segments, x) if segments else nn.Sequential(*layers)(x)
        h.sum().backward()
    return m


def predicted_arrays(n, starts):
    """Saved arrays at the peak, from the rules in minigrad.memory's docstring, for
    layers that save their input and output (union of a segment [p, q): q - p + 1)."""
    bounds = list(starts) + [n]
    k = len(starts)
    terms = [j + (bounds[j + 1] - bounds[j] + 1) for j in range(k - 1)]  # recompute of segment j
    terms.append((k - 1) + (n - bounds[-2] + 1))  # end of forward: k-1 inputs + last segment
    return max(terms)


def test_simple_exact_bytes():
    a = np.ones((4, 8))  # 256 bytes
    with mg.memory.track() as m:
        x = Tensor(a, requires_grad=True)
        y = x.exp()              # saves its output
        v = y.reshape(8, 4)      # a view: no new bytes
        assert mg.memory.live_bytes()["activations"] - m.start["activations"] == 256
        assert mg.memory.live_bytes()["temporaries"] - m.start["temporaries"] == 256
        v.sum().backward()
        del y, v
    assert m.peak["activations"] - m.start["activations"] == 256
    assert m.peak_increase["activations"] == 256
    assert m.end["activations"] == m.start["activations"]
    assert m.end["gradients"] - m.start["gradients"] == 256  # x.grad
    del x
    gc.collect()


def test_no_checkpoint_grows_linearly_and_exactly():
    per = []
    for n in (2, 4, 8):
        m = run(chain(n))
        peak = m.peak["activations"] - m.start["activations"]
        assert peak == (n + 1) * ARR  # x_0 .. x_n, each once
        per.append(peak)
    assert per[2] - per[1] == 2 * (per[1] - per[0])  # linear in n


@pytest.mark.parametrize("n", [4, 9, 16, 25, 36])
def test_sqrt_segments_peak(n):
    k = math.ceil(math.sqrt(n))
    layers = chain(n)
    m = run(layers, k)
    peak = m.peak["activations"] - m.start["activations"]
    size = n // k
    starts = [j * size for j in range(k)]
    assert peak == predicted_arrays(n, starts) * ARR
    assert peak <= 2 * math.sqrt(n) * ARR + 2 * ARR  # O(sqrt n), constant 2
    if k * k == n:
        assert peak == 2 * k * ARR


@pytest.mark.parametrize("starts", [[0], [0, 1], [0, 3, 7], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 8]])
def test_explicit_boundaries_peak_and_counts(starts):
    n = 10
    m = run(chain(n), starts)
    assert m.peak["activations"] - m.start["activations"] == predicted_arrays(n, starts) * ARR
    # One-level plans recompute each checkpointed layer's forward exactly once.
    assert m.counts["forward"]["linear"] == n
    assert m.counts["recompute"]["linear"] == starts[-1]
    assert m.counts["recompute"]["tanh"] == starts[-1]
    for op, c in m.counts["recompute"].items():
        assert c <= m.counts["forward"][op]
    assert m.counts["forward"]["checkpoint"] == len(starts) - 1
    assert m.counts["backward"]["linear"] == n


def test_timeline_totals_and_phases():
    m = run(chain(4), [0, 2])
    phases = [e.phase for e in m.timeline]
    assert phases[0] == "forward" and "recompute" in phases and phases[-1] == "backward"
    first_recompute = phases.index("recompute")
    assert all(p == "forward" for p in phases[:phases.index("backward")])
    assert first_recompute > phases.index("backward")
    for e in m.timeline:
        assert e.live["total"] == sum(v for k, v in e.live.items() if k != "total")
    assert set(m.peak) == {"parameters", "buffers", "gradients", "activations", "optimizer",
                           "temporaries", "total"}
    assert max(e.live["activations"] for e in m.timeline) <= m.peak["activations"]
    assert m.peak["total"] <= sum(v for k, v in m.peak.items() if k != "total")


def test_parameter_gradient_optimizer_and_buffer_bytes():
    mg.random.manual_seed(0)
    with mg.memory.track() as m:
        model = nn.Sequential(nn.Linear(D, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))
        params = model.parameters()
        p_bytes = sum(p.data.nbytes for p in params)
        opt = optim.AdamW(params, lr=1e-3)
        x = Tensor(np.ones((B, D), np.float32))
        model(x).sum().backward()
        opt.step()
        live = mg.memory.live_bytes()
    assert live["parameters"] - m.start["parameters"] == p_bytes
    assert live["gradients"] - m.start["gradients"] == p_bytes
    assert live["optimizer"] - m.start["optimizer"] == 2 * p_bytes
    assert live["buffers"] - m.start["buffers"] == 2 * 32 * 4
    assert m.peak["parameters"] - m.start["parameters"] == p_bytes
    opt.zero_grad()
    assert mg.memory.live_bytes()["gradients"] == m.start["gradients"]


def test_view_of_parameter_counts_as_parameter():
    w = nn.Parameter(np.ones((4, 4)))
    with mg.memory.track() as m:
        x = Tensor(np.ones((2, 4)), requires_grad=True)
        y = x @ w.T  # matmul saves x and a view of w
        assert mg.memory.live_bytes()["activations"] - m.start["activations"] == x.nbytes
        del y
    assert mg.memory.live_bytes()["activations"] == m.start["activations"]


def test_no_grad_saves_nothing_and_everything_is_freed():
    layers = chain(6)
    x = Tensor(np.ones((B, D)))
    with mg.memory.track() as m:
        with mg.no_grad():
            y = nn.Sequential(*layers)(x)
        assert m.peak["activations"] == m.start["activations"]
        # each op output dies once the next op has used it: at most ~3 arrays at once
        assert m.peak["temporaries"] - m.start["temporaries"] <= 3 * ARR
        del y
    assert m.end == m.start


def test_unused_graph_releases_activations_when_dropped():
    x = Tensor(np.ones((B, D)), requires_grad=True)
    before = mg.memory.live_bytes()["activations"]
    y = (x.exp() * x).tanh()
    assert mg.memory.live_bytes()["activations"] > before
    del y
    assert mg.memory.live_bytes()["activations"] == before


def test_unsaved_op_outputs_are_freed_during_forward():
    # Linear's output is not saved (Tanh saves its own output), so it dies as soon
    # as Tanh has run: the graph holds nodes, not the tensors that flowed through them.
    for n in (2, 8):
        layers = chain(n)
        x = Tensor(np.ones((B, D)))
        with mg.memory.track() as m:
            h = nn.Sequential(*layers)(x)
            live = mg.memory.live_bytes()
        assert live["activations"] - m.start["activations"] == (n + 1) * ARR
        assert live["temporaries"] - m.start["temporaries"] == -ARR  # x became an activation
        assert m.peak["temporaries"] - m.start["temporaries"] <= ARR  # one Linear output at a time
        del h


def test_saved_view_outlives_the_tensor_it_came_from():
    # An int tensor whose data is itself a view (of an array minigrad never saw);
    # cross_entropy saves another view of the same buffer.
    target = Tensor(np.array([0, 1, 2]).reshape(1, 3))
    logits = Tensor(np.zeros((1, 3, 4)), requires_grad=True)
    before = mg.memory.live_bytes()["activations"]
    loss = mg.cross_entropy(logits, target)
    del target
    gc.collect()
    # logp (3 x 4 float64) and the 3 int64 targets stay saved until backward
    assert mg.memory.live_bytes()["activations"] - before == 3 * 4 * 8 + 3 * 8
    loss.backward()
    assert mg.memory.live_bytes()["activations"] == before


def test_unknown_phase_and_role_are_named():
    with pytest.raises(ValueError, match=r"memory.phase: unknown phase 'bogus'; allowed: \['forward', 'recompute', 'backward'\]"):
        with mg.memory.phase("bogus"):
            pass
    with pytest.raises(ValueError, match="unknown phase 'bogus'"):
        mg.memory.phase("bogus")          # at the call, not only when the block is entered
    with pytest.raises(ValueError, match="unknown role 'weights'"):
        mg.memory.hold(np.ones(2), "weights")
    with mg.memory.track() as m:
        pass
    with pytest.raises(ValueError, match="Tracker.ops: unknown phase 'fwd'"):
        m.ops("fwd")


def test_public_buffer_helpers():
    a = np.zeros((4, 4))
    assert mg.memory.base_buffer(a.T[1:]) is a
    w = nn.Parameter(np.ones(3))
    assert mg.memory.category(w.data) == "parameters"
    assert mg.memory.category(w.data[1:]) == "parameters"  # a view counts as its buffer
    assert mg.memory.category(np.ones(3)) is None  # never registered
    x = Tensor(np.ones(3), requires_grad=True)
    y = x.exp()
    assert mg.memory.category(y.data) == "activations"  # exp saves its output
    import gc as _gc
    was = _gc.isenabled()
    with mg.memory.gc_paused():
        assert not _gc.isenabled()
    assert _gc.isenabled() == was
