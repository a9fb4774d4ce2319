"""bookkit.event_table and bookkit.timelines: one step event by event (chapters 2-4)."""
import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import minigrad  # noqa: E402
from minigrad import Tensor, memory, nn  # noqa: E402
from minigrad.checkpoint import checkpoint  # noqa: E402

from bookkit.event_table import LayerTags, event_rows, format_event_table  # noqa: E402
from bookkit.timelines import overlay_timelines  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _block(i, h):
    return nn.Sequential(nn.Linear(i, h), nn.Tanh(), nn.Linear(h, i))


def _tracked_chain(batch=8, width=4, hidden=32, checkpoint_middle=False, use_reentrant=True):
    minigrad.random.manual_seed(0)
    blocks = [_block(width, hidden) for _ in range(3)]
    x = Tensor(minigrad.random.randn(batch, width))
    tags = LayerTags()
    a, b, c = (tags.wrap(n, blk) for n, blk in zip("ABC", blocks))
    mid = tags.wrap("B", lambda h: checkpoint(b, h, use_reentrant=use_reentrant)) if checkpoint_middle else b
    with tags.track() as m:
        loss = c(mid(a(x))).sum()
        loss.backward()
    return m, tags, blocks


def test_event_rows_plain_chain_keeps_then_frees_everything():
    batch, width, hidden = 8, 4, 32
    m, tags, _ = _tracked_chain(batch, width, hidden)
    rows = event_rows(m, tags)
    fwd = [r for r in rows if r.phase == "forward"]
    bwd = [r for r in rows if r.phase == "backward"]
    assert [r.layer for r in fwd] == ["A"] * 3 + ["B"] * 3 + ["C"] * 3 + [""]  # the sum is untagged
    # every block keeps its input and its tanh output (float32), nothing else
    assert sum(r.saved_delta for r in fwd) == m.peak["activations"] == 3 * 4 * batch * (width + hidden)
    assert [r.saved_delta for r in fwd[:3]] == [4 * batch * width, 4 * batch * hidden, 0]
    # backward undoes the blocks in reverse order and names them from the forward rows
    assert [r.layer for r in bwd if r.layer] == ["C"] * 3 + ["B"] * 3 + ["A"] * 3
    assert rows[-1].saved_live == 0
    assert all(r.saved_delta <= 0 for r in bwd)
    assert [r.index for r in rows] == list(range(1, len(rows) + 1))


def test_event_rows_checkpointed_block_is_dropped_then_rebuilt():
    # use_reentrant=True: "Dropping and rebuilding"'s hand-written checkpoint, as the library's Checkpoint
    batch, width, hidden = 8, 4, 32
    m, tags, _ = _tracked_chain(batch, width, hidden, checkpoint_middle=True)
    rows = event_rows(m, tags)
    b_fwd = [r for r in rows if r.phase == "forward" and r.layer == "B"]
    assert [r.op for r in b_fwd] == ["linear", "tanh", "linear", "checkpoint"]
    assert all(r.saved_delta == 0 and "nothing kept" in r.note for r in b_fwd[:3])
    rec = [r for r in rows if r.phase == "recompute"]
    assert [(r.layer, r.op) for r in rec] == [("B", "linear"), ("B", "tanh"), ("B", "linear")]
    assert rec[1].saved_delta == 4 * batch * hidden and "rebuilds" in rec[1].note
    ck_bwd = [r for r in rows if r.phase == "backward" and r.op == "checkpoint"]
    assert len(ck_bwd) == 1 and ck_bwd[0].layer == "B"
    # the rebuilt nodes are undone before the checkpoint node frees B's input
    assert ck_bwd[0].saved_delta == -4 * batch * width
    assert rows[-1].saved_live == 0
    plain, _, _ = _tracked_chain(batch, width, hidden)
    assert m.peak["activations"] < plain.peak["activations"]


def test_event_rows_non_reentrant_checkpoint_keeps_its_input_then_runs_with_hooks():
    batch, width, hidden = 8, 4, 32
    m, tags, _ = _tracked_chain(batch, width, hidden, checkpoint_middle=True, use_reentrant=False)
    rows = event_rows(m, tags)
    b_fwd = [r for r in rows if r.phase == "forward" and r.layer == "B"]
    # the checkpoint keeps B's input first; B's ops then run with grad but keep nothing
    assert [r.op for r in b_fwd] == ["checkpoint", "linear", "tanh", "linear"]
    assert b_fwd[0].saved_delta == 4 * batch * width
    assert all(r.saved_delta == 0 for r in b_fwd[1:])
    # the recomputation rebuilds B: its last linear saves its input, so even with early stop
    # it runs (early stop skips only what follows the last op that saves something)
    rec = [r for r in rows if r.phase == "recompute"]
    assert [(r.layer, r.op) for r in rec] == [("B", "linear"), ("B", "tanh"), ("B", "linear")]
    assert rec[1].saved_delta == 4 * batch * hidden
    b_bwd = [r for r in rows if r.phase == "backward" and r.layer == "B"]
    assert [r.op for r in b_bwd] == ["linear", "tanh", "linear"]
    # B's first linear is the last to need the checkpoint: its input goes with it
    assert b_bwd[-1].saved_delta == -4 * batch * width
    assert rows[-1].saved_live == 0
    reentrant, _, _ = _tracked_chain(batch, width, hidden, checkpoint_middle=True)
    assert m.peak["activations"] == reentrant.peak["activations"]


def test_event_table_text_and_bad_unit():
    m, tags, _ = _tracked_chain()
    rows = event_rows(m, tags)
    text = format_event_table(rows, unit="B")
    assert len(text.splitlines()) == len(rows) + 3
    assert "tanh" in text and "keeps 1.0 KiB for backward" in text
    with pytest.raises(ValueError, match="unit"):
        format_event_table(rows, unit="GB")


def test_event_rows_needs_a_timeline():
    with memory.track(record_timeline=False) as m:
        Tensor(np.ones(3, np.float32), requires_grad=True).sum().backward()
    with pytest.raises(ValueError, match="timeline is empty"):
        event_rows(m)


def test_layer_tags_rejects_non_callables():
    with pytest.raises(TypeError, match="not callable"):
        LayerTags().wrap("x", 3)


def test_overlay_timelines_draws_one_line_per_tracker():
    m1, _, _ = _tracked_chain()
    m2, _, _ = _tracked_chain(checkpoint_middle=True)
    ax = overlay_timelines({"plain": m1, "checkpointed": m2})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["plain", "checkpointed"]
    assert ax.get_ylabel() == "saved activations (KiB)"
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("plain", "checkpointed")]
    assert [len(ln.get_xdata()) for ln in lines] == [len(m1.timeline) + 1, len(m2.timeline) + 1]
    assert max(lines[0].get_ydata()) * 1024 == m1.peak["activations"]
    with pytest.raises(ValueError, match="unknown category"):
        overlay_timelines({"plain": m1}, category="weights")
    with pytest.raises(ValueError, match="no trackers"):
        overlay_timelines({})


def test_labels_must_match_the_tracker():
    m, tags, _ = _tracked_chain()
    other = LayerTags()
    with pytest.raises(ValueError, match="labels for"):
        event_rows(m, other)


def test_nested_wrapped_layers_name_the_innermost():
    minigrad.random.manual_seed(0)
    tags = LayerTags()
    inner = tags.wrap("inner", nn.Linear(3, 3))
    outer = tags.wrap("outer", lambda h: inner(h).tanh())
    x = Tensor(minigrad.random.randn(2, 3))
    with tags.track() as m:
        outer(x).sum().backward()
    rows = event_rows(m, tags)
    assert [(r.phase, r.layer, r.op) for r in rows] == [
        ("forward", "inner", "linear"), ("forward", "outer", "tanh"), ("forward", "", "sum"),
        ("backward", "", "sum"), ("backward", "outer", "tanh"), ("backward", "inner", "linear")]
