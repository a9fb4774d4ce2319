"""bookkit.crosscheck: the same MLP in minigrad and torch gives the same numbers.

Each byte count is checked against a count made by hand from the shapes; losses and
gradients are compared across frameworks (float tolerance) and, within a framework,
with and without checkpointing (bit for bit, on a CPU).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bookkit import crosscheck as cc  # noqa: E402
from minigrad import optim  # noqa: E402

SIZES = [(16, 32, 8), (6, 12, 10, 3)]


def fresh_steps(sizes, x, checkpointed, with_optimizer=True):
    mg, tm = cc.build_mlps(sizes, seed=3)
    mg_opt = optim.AdamW(mg.parameters(), lr=1e-3) if with_optimizer else None
    t_opt = torch.optim.AdamW(tm.parameters(), lr=1e-3) if with_optimizer else None
    return (cc.minigrad_step(mg, x, checkpointed, mg_opt),
            cc.torch_step(tm, x, checkpointed, t_opt))


def param_bytes(sizes, itemsize=4):
    return itemsize * sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


@pytest.mark.parametrize("sizes", SIZES)
def test_build_mlps_same_weights_and_layers(sizes):
    mg, tm = cc.build_mlps(sizes, seed=1)
    mg_params, t_params = dict(mg.named_parameters()), dict(tm.named_parameters())
    assert list(mg_params) == list(t_params)
    for name, p in mg_params.items():
        assert np.array_equal(p.data, t_params[name].detach().numpy())
    kinds = [type(m).__name__ for m in tm]
    assert kinds == [type(m).__name__ for m in mg]
    assert kinds.count("Linear") == len(sizes) - 1 and kinds.count("ReLU") == len(sizes) - 2
    assert kinds[-1] == "Linear"
    # Another seed gives other weights: the copy is not a coincidence of defaults.
    other, _ = cc.build_mlps(sizes, seed=2)
    assert not np.array_equal(other[0].weight.data, mg[0].weight.data)


@pytest.mark.parametrize("bad", [[4], [4, 0, 2], []])
def test_build_mlps_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="sizes"):
        cc.build_mlps(bad)


def test_copy_weights_names_the_mismatch():
    mg, _ = cc.build_mlps((4, 5, 2))
    _, tm = cc.build_mlps((4, 6, 2))
    with pytest.raises(ValueError, match=r"0\.weight"):
        cc.copy_weights(mg, tm)
    _, deeper = cc.build_mlps((4, 5, 5, 2))
    with pytest.raises(ValueError, match="names differ"):
        cc.copy_weights(mg, deeper)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("checkpointed", [False, True])
def test_same_loss_gradients_and_bytes(sizes, checkpointed):
    batch = 5
    x = cc.batches(1, batch, sizes[0], seed=7)[0]
    r_mg, r_t = fresh_steps(sizes, x, checkpointed)
    assert r_mg.loss == pytest.approx(r_t.loss, rel=1e-5)
    assert cc.max_abs_diff(r_mg.grads, r_t.grads) < 1e-5
    assert r_mg.model_forwards == r_t.model_forwards == (2 if checkpointed else 1)

    # Saved by the MLP, by hand: the input (first Linear) and every hidden ReLU output
    # (saved by the ReLU and the next Linear: one buffer); with one checkpoint around
    # the MLP only its input.
    hand_model = 4 * batch * (sizes[0] if checkpointed else sum(sizes[:-1]))
    for r in (r_mg, r_t):
        assert r.categories["saved_by_model"] == hand_model
        assert r.categories["parameters"] == param_bytes(sizes)
        assert r.categories["gradients"] == param_bytes(sizes)
    # The loss: minigrad's MSE saves the difference y - target; torch's saves y and
    # the target.
    out = 4 * batch * sizes[-1]
    assert r_mg.categories["saved_by_loss"] == out
    assert r_t.categories["saved_by_loss"] == 2 * out
    for r in (r_mg, r_t):
        c = r.categories
        assert c["saved"] == c["saved_by_model"] + c["saved_by_loss"]
        assert sum(b for _, b in r.saved_tensors.values()) == c["saved"]
    # AdamW: two moments per parameter; torch also keeps each parameter's step count
    # as a one-element float32 tensor.
    n_params = len(r_mg.grads)
    assert r_mg.categories["optimizer"] == 2 * param_bytes(sizes)
    assert r_t.categories["optimizer"] == 2 * param_bytes(sizes) + 4 * n_params
    # The whole step peaks in the optimizer step, once the graph is gone: gradients,
    # optimizer state and the input (minigrad: differences from the step's start, so
    # without the parameters; MemTracker: absolute, its AdamW scratch under Optstate).
    x_bytes = 4 * batch * sizes[0]
    assert r_mg.meters["ledger_peak"]["total"] == 3 * param_bytes(sizes) + x_bytes
    peak = r_t.meters["tracker_peak"]
    assert peak["Total"] - peak["Optstate"] == 2 * param_bytes(sizes) + x_bytes
    assert peak["Optstate"] >= r_t.categories["optimizer"]


def test_minigrad_step_repeatable_with_the_same_input_array():
    # The ledger is process-wide: a step must count its own input even when an earlier
    # step already wrapped the very same NumPy array.
    x = cc.batches(1, 3, 16)[0]
    first = fresh_steps((16, 32, 8), x, True, with_optimizer=False)[0]
    second = fresh_steps((16, 32, 8), x, True, with_optimizer=False)[0]
    assert first.categories == second.categories
    assert first.meters == second.meters


def test_checkpointing_changes_nothing_but_memory_bitwise():
    x = cc.batches(1, 4, 16, seed=0)[0]
    plain = fresh_steps((16, 32, 8), x, False)
    ckpt = fresh_steps((16, 32, 8), x, True)
    for p, c in zip(plain, ckpt):
        assert p.loss == c.loss
        assert cc.max_abs_diff(p.grads, c.grads) == 0.0
        assert c.categories["saved_by_model"] < p.categories["saved_by_model"]


def test_unsaved_outputs_are_freed_in_both_engines():
    # An op output that no backward saves (the pre-ReLU output, the MSE target) is
    # freed as soon as nothing references it: graph nodes point at nodes, not at their
    # input tensors (torch's design, and minigrad's). After the loss the ledger's
    # temporaries are the output y, which the caller holds, and the 4-byte loss.
    sizes, batch = (16, 32, 8), 4
    x = cc.batches(1, batch, 16)[0]
    r_mg, r_t = fresh_steps(sizes, x, False, with_optimizer=False)
    hidden, out = 4 * batch * 32, 4 * batch * 8
    assert r_mg.meters["ledger_temporaries_after_forward"] == out + 4
    assert r_mg.categories["optimizer"] is None and r_t.categories["optimizer"] is None
    # MemTracker's "Activation" is what forward created and still holds: the ReLU
    # output, y, the target and the loss (whose CPU storage holds the elementwise
    # losses, batch x out floats); "Other" is the input.
    after = r_t.meters["tracker_after_forward"]
    assert after["Other"] == 4 * batch * 16
    assert after["Activation"] == hidden + 3 * out
    assert r_mg.meters["ledger_peak"]["activations"] == r_mg.categories["saved"]


def test_minigrad_saved_arrays_counts_views_once_and_skips_parameters():
    import minigrad

    mg, _ = cc.build_mlps((3, 4, 2))
    x = minigrad.Tensor(np.ones((2, 3), np.float32))
    h = mg[1](mg[0](x))
    y = (h * h).sum()  # mul saves h twice: one buffer
    got = cc.minigrad_saved_arrays(y)
    assert got == {((2, 4), "float32"): (1, 32), ((2, 3), "float32"): (1, 24)}


@pytest.mark.parametrize("bad", [np.ones((4, 7), np.float32), np.ones(16, np.float32)])
def test_steps_reject_wrong_input_shape(bad):
    mg, tm = cc.build_mlps((16, 8, 2))
    with pytest.raises(ValueError, match=r"\(batch, 16\)"):
        cc.minigrad_step(mg, bad, False)
    with pytest.raises(ValueError, match=r"\(batch, 16\)"):
        cc.torch_step(tm, bad, False)


def test_steps_refuse_stale_gradients():
    mg, tm = cc.build_mlps((4, 3, 2))
    x = np.ones((2, 4), np.float32)
    cc.minigrad_step(mg, x, False)
    cc.torch_step(tm, x, False)
    with pytest.raises(ValueError, match="zero_grad"):
        cc.minigrad_step(mg, x, False)
    with pytest.raises(ValueError, match="zero_grad"):
        cc.torch_step(tm, x, False)


def test_train_s9_curves_and_state():
    sizes = (16, 32, 8)
    data = cc.batches(4, 6, 16, seed=1)
    runs = {(f, c): cc.train(f, sizes, data, c, lr=1e-2) for f in ("minigrad", "torch")
            for c in (False, True)}
    for f in ("minigrad", "torch"):
        plain, ckpt = runs[f, False], runs[f, True]
        assert plain.losses == ckpt.losses
        for a, b in ((plain.params, ckpt.params), (plain.exp_avg, ckpt.exp_avg),
                     (plain.exp_avg_sq, ckpt.exp_avg_sq)):
            assert cc.max_abs_diff(a, b) == 0.0
        assert plain.losses[-1] < plain.losses[0]  # it trains
    mg, t = runs["minigrad", False], runs["torch", False]
    np.testing.assert_allclose(mg.losses, t.losses, rtol=1e-5)
    assert cc.max_abs_diff(mg.params, t.params) < 1e-5
    assert cc.max_abs_diff(mg.exp_avg, t.exp_avg) < 1e-6
    with pytest.raises(ValueError, match="framework"):
        cc.train("jax", sizes, data, False)


def test_tables_show_the_measured_numbers():
    x = cc.batches(1, 4, 16)[0]
    recs = list(fresh_steps((16, 32, 8), x, False)) + list(fresh_steps((16, 32, 8), x, True))
    table = cc.category_table(recs, unit=1)
    assert len(table.rows) == len(cc.CATEGORY_ROWS) and len(table.header) == 5
    model_row = next(r for r in table.rows if r[0].startswith("saved for backward by the MLP"))
    assert model_row[1:] == [f"{4 * 4 * 48:,}"] * 2 + [f"{4 * 4 * 16:,}"] * 2
    assert "saved for backward by the MLP" in table._repr_html_()
    saved = cc.saved_table(recs)
    assert saved.rows[0][0] == "(4, 32) float32" or any(
        r[0] == "(4, 32) float32" for r in saved.rows)
    assert saved.rows[-1][0] == "total"
    with pytest.raises(ValueError, match="no records"):
        cc.category_table([])
    with pytest.raises(ValueError, match="unit"):
        cc.category_table(recs, unit=0)


def test_max_abs_diff_checks_keys_and_shapes():
    a = {"w": np.zeros((2, 2))}
    assert cc.max_abs_diff(a, {"w": np.full((2, 2), -0.5)}) == 0.5
    with pytest.raises(ValueError, match="keys"):
        cc.max_abs_diff(a, {"v": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="shape"):
        cc.max_abs_diff(a, {"w": np.zeros(3)})


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("checkpointed", [False, True])
def test_allocator_figures_count_the_input_and_compare_like_with_like(sizes, checkpointed):
    # The allocator's window opens before the input exists, on any device (on a GPU
    # the same code reads the caching allocator), so "held after the loss" is what
    # the saved-tensor meter counts (the input included) plus what else the forward
    # left alive: the loss's storage and, with checkpointing, the CPU RNG state that
    # preserve_rng_state keeps for the recomputation.
    batch = 5
    x = cc.batches(1, batch, sizes[0], seed=7)[0]
    _, tm = cc.build_mlps(sizes, seed=3)
    r = cc.torch_step(tm, x, checkpointed, torch.optim.AdamW(tm.parameters(), lr=1e-3))
    with torch.no_grad():
        y = tm(torch.from_numpy(x))
        loss_storage = torch.nn.functional.mse_loss(y, torch.zeros_like(y)).untyped_storage().nbytes()
    rng_state = torch.get_rng_state().numel() if checkpointed else 0
    assert r.meters["allocator_after_forward"] == r.categories["saved"] + loss_storage + rng_state
    assert r.categories["saved"] >= 4 * batch * sizes[0]          # the input is in it
    # The step's peak, weights excluded, is MemTracker's total minus the parameters:
    # what the CUDA figure of the same window is compared with. (The allocator also
    # sees AdamW's scalar temporaries and the RNG state, a few KiB at most.)
    p = r.meters["tracker_peak"]
    beyond_weights = p["Total"] - p["Parameter"] - p["Buffer"]
    assert 0 <= r.meters["allocator_step_peak"] - beyond_weights <= rng_state + 4096
