"""minigrad's checkpoint and torch.utils.checkpoint side by side, on the same functions.

Each scenario is written once against a small adapter (`MG` or `TORCH`) and run in both
frameworks in float64; the outcomes must agree: the same gradients (to 1e-12), the same
``requires_grad`` flags and ``.grad`` left unset, the same warnings, or an error of the
same kind. The scenarios are the ways a user can break a checkpoint: keyword and nested
tensor inputs, non-leaf inputs also used outside, autograd inside the function, outputs
that need no gradient, several outputs, nested checkpoints with and without early stop,
``retain_graph``, ``grad()`` on intermediate tensors, a function that changes between the
forward and the recomputation, dropout with and without RNG replay, the reentrant variant's
traps, ``checkpoint_sequential``, 0-d tensors, broadcasting and in-place ``.data`` edits.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.utils.checkpoint as tcp  # noqa: E402

import minigrad as mg  # noqa: E402
import minigrad.ops as F  # noqa: E402
from minigrad import checkpoint as mcp  # noqa: E402

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((3, 4))
C = RNG.standard_normal((2, 1, 4))
D = RNG.standard_normal((3, 1))


class MG:
    name = "minigrad"
    checkpoint = staticmethod(mcp.checkpoint)
    checkpoint_sequential = staticmethod(mcp.checkpoint_sequential)
    grad = staticmethod(mg.grad)
    early_stop = staticmethod(mcp.set_checkpoint_early_stop)
    CheckpointError = mcp.CheckpointError

    @staticmethod
    def tensor(a, rg=False):
        return mg.Tensor(np.array(a, dtype=np.float64), requires_grad=rg)

    @staticmethod
    def dropout(x, p):
        return F.dropout(x, p)

    @staticmethod
    def seed(s):
        mg.random.manual_seed(s)

    @staticmethod
    def numpy(x):
        return None if x is None else np.array(x.data if isinstance(x, mg.Tensor) else x)

    @staticmethod
    def set_data(t, a):
        t.data[...] = a


class TORCH:
    name = "torch"
    grad = staticmethod(torch.autograd.grad)
    early_stop = staticmethod(tcp.set_checkpoint_early_stop)
    CheckpointError = tcp.CheckpointError

    @staticmethod
    def checkpoint(fn, *args, **kwargs):
        return tcp.checkpoint(fn, *args, **kwargs)

    @staticmethod
    def checkpoint_sequential(functions, segments, x, **kwargs):
        return tcp.checkpoint_sequential(functions, segments, x, **kwargs)

    @staticmethod
    def tensor(a, rg=False):
        return torch.tensor(np.array(a, dtype=np.float64), requires_grad=rg)

    @staticmethod
    def dropout(x, p):
        return torch.nn.functional.dropout(x, p)

    @staticmethod
    def seed(s):
        torch.manual_seed(s)

    @staticmethod
    def numpy(x):
        return None if x is None else (x.detach().numpy() if isinstance(x, torch.Tensor) else np.array(x))

    @staticmethod
    def set_data(t, a):
        t.data.copy_(torch.tensor(a))


def outcome(scenario, lib):
    """``("ok", result, warnings)`` or ``("error", kind, warnings)``: kind is "checkpoint"
    for a CheckpointError, else the builtin exception class the error derives from."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", scenario(lib))
        except lib.CheckpointError:
            result = ("error", "checkpoint")
        except (RuntimeError, ValueError, TypeError) as e:
            kind = next(k for k in (RuntimeError, ValueError, TypeError) if isinstance(e, k))
            result = ("error", kind.__name__)
    said = sorted({"requires_grad=True" for w in caught if "None of the inputs have requires_grad" in str(w.message)})
    return result + (said,)


def same(x, y):
    if isinstance(x, (list, tuple)):
        return isinstance(y, (list, tuple)) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if x is None or isinstance(x, (bool, str, int)):
        return x == y
    return np.allclose(x, y, rtol=1e-12, atol=1e-12)


SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# --- inputs of any structure ----------------------------------------------------------------
@scenario
def keyword_tensor_input(L):
    a, b = L.tensor(A, True), L.tensor(B, True)
    out = L.checkpoint(lambda a, blah: (a * blah).tanh(), a, blah=b, use_reentrant=False)
    ga, gb = L.grad(out.sum(), [a, b])
    return L.numpy(ga), L.numpy(gb), a.grad is None, b.grad is None


@scenario
def tensors_in_lists_tuples_dicts(L):
    a, b, c = L.tensor(A, True), L.tensor(B, True), L.tensor(A * 2, True)
    out = L.checkpoint(lambda xs, d: (xs[0] * xs[1][0]).exp() + d["c"].tanh(), [a, (b,)], {"c": c},
                       use_reentrant=False)
    return [L.numpy(g) for g in L.grad(out.sum(), [a, b, c])]


@scenario
def non_leaf_keyword_input_also_used_outside(L):
    a, w = L.tensor(A, True), L.tensor(B, True)
    h = a * w
    out = L.checkpoint(lambda x, scale=None: (x * scale).exp(), a, scale=h, use_reentrant=False)
    (out + h * h).sum().backward()
    return L.numpy(a.grad), L.numpy(w.grad)


@scenario
def same_tensor_passed_twice(L):
    a = L.tensor(A, True)
    L.checkpoint(lambda x, y: (x * y).tanh(), a, a, use_reentrant=False).sum().backward()
    return L.numpy(a.grad)


@scenario
def non_tensor_arguments_and_outputs(L):
    a = L.tensor(A, True)
    out = L.checkpoint(lambda x, k, s: {"y": x.exp() * k, "s": s, "n": [x.tanh(), 3]}, a, 2.5, "tag",
                       use_reentrant=False)
    (out["y"].sum() + out["n"][0].sum()).backward()
    return L.numpy(a.grad), out["s"], out["n"][1]


# --- autograd inside, outputs without gradient, several outputs ------------------------------
@scenario
def grad_inside_the_function(L):
    a = L.tensor(A, True)

    def f(x):
        (g,) = L.grad((x * x).sum(), [x])
        return x.tanh() * float(L.numpy(g).sum())
    L.checkpoint(f, a, use_reentrant=False).sum().backward()
    return L.numpy(a.grad)


@scenario
def backward_inside_the_function(L):
    a, w = L.tensor(A, True), L.tensor(B, True)
    inner = L.tensor(D, True)

    def f(x):
        (inner * inner).sum().backward()
        return x.tanh() * w
    L.checkpoint(f, a, use_reentrant=False).sum().backward()
    return L.numpy(a.grad), L.numpy(w.grad), L.numpy(inner.grad)  # inner: one backward per forward run


@scenario
def output_that_needs_no_grad(L):
    out = L.checkpoint(lambda x: x.tanh(), L.tensor(A), use_reentrant=False)
    requires = out.requires_grad
    out.sum().backward()
    return requires


@scenario
def parameter_inside_but_input_without_grad(L):
    w = L.tensor(B, True)
    out = L.checkpoint(lambda x: (x * w).exp(), L.tensor(A), use_reentrant=False)
    out.sum().backward()
    return out.requires_grad, L.numpy(w.grad)


@scenario
def only_one_of_two_outputs_used(L):
    a, b = L.tensor(A, True), L.tensor(B, True)
    y, z = L.checkpoint(lambda x, y: (x.tanh(), y.exp()), a, b, use_reentrant=False)
    y.sum().backward()
    return L.numpy(a.grad), b.grad is None


@scenario
def identity_and_view_outputs(L):
    a = L.tensor(A, True)
    same_, view = L.checkpoint(lambda x: (x, x.T), a, use_reentrant=False)
    (same_ * 2.0 + view.T * view.T).sum().backward()
    return L.numpy(a.grad)


@scenario
def input_detached_inside(L):
    a, w = L.tensor(A, True), L.tensor(B, True)
    L.checkpoint(lambda x: x.detach() * w, a, use_reentrant=False).sum().backward()
    return a.grad is None, L.numpy(w.grad)


# --- backward passes: retain_graph, a second backward, grad() on intermediates -----------------
@scenario
def retain_graph_then_second_backward(L):
    a = L.tensor(A, True)
    loss = L.checkpoint(lambda x: (x.tanh() * x).exp(), a, use_reentrant=False).sum()
    loss.backward(retain_graph=True)
    first = L.numpy(a.grad).copy()
    loss.backward()
    return first, L.numpy(a.grad)


@scenario
def third_backward_after_retain_is_an_error(L):
    a = L.tensor(A, True)
    loss = L.checkpoint(lambda x: (x.tanh() * x).exp(), a, use_reentrant=False).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    loss.backward()


@scenario
def two_losses_on_one_checkpoint_without_retain(L):
    a = L.tensor(A, True)
    out = L.checkpoint(lambda x: (x * x).exp(), a, use_reentrant=False)
    out.sum().backward()
    (out * out).sum().backward()


@scenario
def grad_of_the_checkpoint_input_intermediate(L):
    a = L.tensor(A, True)
    h = a.tanh()
    out = L.checkpoint(lambda x: (x * x).exp(), h, use_reentrant=False)
    (gh,) = L.grad(out.sum(), [h])
    return L.numpy(gh), a.grad is None


@scenario
def grad_of_a_tensor_made_inside_then_full_backward(L):
    a = L.tensor(A, True)
    inside = {}

    def f(x):
        inside["h"] = x.tanh()
        return (inside["h"] * inside["h"]).exp()
    loss = L.checkpoint(f, a, use_reentrant=False).sum()
    (gh,) = L.grad(loss, [inside["h"]], retain_graph=True)
    loss.backward()
    return L.numpy(gh), L.numpy(a.grad)


@scenario
def grad_of_the_checkpoint_output(L):
    a = L.tensor(A, True)
    out = L.checkpoint(lambda x: (x * x).exp(), a, use_reentrant=False)
    (g,) = L.grad((out * 3.0).sum(), [out])
    return L.numpy(g)


@scenario
def backward_with_inputs(L):
    a, w = L.tensor(A, True), L.tensor(B, True)
    L.checkpoint(lambda x: (x * w).exp(), a, use_reentrant=False).sum().backward(inputs=[w])
    return a.grad is None, L.numpy(w.grad)


# --- nested checkpoints ---------------------------------------------------------------------
def _nested(L, early_stop, variant):
    a, w = L.tensor(A, True), L.tensor(B, True)
    cp = L.checkpoint

    def inner(x):
        return (x * w).tanh().exp()

    def outer(x):
        y = cp(inner, x, use_reentrant=False)
        if variant == 1:   # two children, the second on the first's output
            y = cp(inner, y * 0.1, use_reentrant=False) + y
        if variant == 2:   # three levels
            y = cp(lambda z: cp(inner, z, use_reentrant=False) * z, y, use_reentrant=False)
        if variant == 3:   # a reentrant checkpoint inside
            y = cp(inner, y, use_reentrant=True)
        return y * x
    with L.early_stop(early_stop):
        out = cp(outer, a, use_reentrant=False)
    loss = (out * out).sum()
    (gw,) = L.grad(loss, [w], retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward()
    return L.numpy(gw), L.numpy(a.grad), L.numpy(w.grad)


for _es in (True, False):
    for _v in range(4):
        SCENARIOS[f"nested_early_stop_{_es}_variant_{_v}"] = (
            lambda L, es=_es, v=_v: _nested(L, es, v))


@scenario
def nested_non_reentrant_inside_reentrant(L):
    a, w = L.tensor(A, True), L.tensor(B, True)

    def outer(x):
        return L.checkpoint(lambda z: (z * w).tanh(), x.exp(), use_reentrant=False) * x
    L.checkpoint(outer, a, use_reentrant=True).sum().backward()
    return L.numpy(a.grad), L.numpy(w.grad)


# --- the recomputation differs from the forward ------------------------------------------------
def _changing(L, change, check="default", early_stop=True):
    a = L.tensor(A, True)
    runs = []

    def f(x):
        runs.append(1)
        first = len(runs) == 1
        if change == "shape" and not first:
            x = x[:2]
        y = x.tanh()
        if change == "missing_op" and first:
            y = y.exp()
        y = y * x
        if change == "extra_op" and not first:
            y = y.exp()                 # after the last saved array: early stop never runs it
        return y.sum()
    with L.early_stop(early_stop):
        out = L.checkpoint(f, a, use_reentrant=False, determinism_check=check)
    out.backward()
    return L.numpy(a.grad)


for _change in ("shape", "extra_op", "missing_op"):
    SCENARIOS[f"recomputation_{_change}"] = lambda L, c=_change: _changing(L, c)
SCENARIOS["recomputation_shape_without_check"] = lambda L: _changing(L, "shape", "none")
SCENARIOS["recomputation_extra_op_without_early_stop"] = lambda L: _changing(L, "extra_op", early_stop=False)
SCENARIOS["bad_determinism_check_value"] = lambda L: _changing(L, "none", "bogus")


# --- random numbers -------------------------------------------------------------------------
def _dropout(L, preserve, use_reentrant):
    L.seed(0)
    a = L.tensor(A, True)
    out = L.checkpoint(lambda x: L.dropout(x.tanh(), 0.5) * x, a, use_reentrant=use_reentrant,
                       preserve_rng_state=preserve)
    L.seed(0)
    b = L.tensor(A, True)
    (L.dropout(b.tanh(), 0.5) * b).sum().backward()
    L.seed(123)             # the RNG moves on between the forward and the recomputation
    out.sum().backward()
    return bool(np.array_equal(L.numpy(a.grad), L.numpy(b.grad)))


for _p in (True, False):
    for _r in (True, False):
        SCENARIOS[f"dropout_preserve_{_p}_reentrant_{_r}"] = lambda L, p=_p, r=_r: _dropout(L, p, r)


# --- use_reentrant=True -----------------------------------------------------------------------
@scenario
def reentrant_inputs_without_grad_warn_and_give_no_gradient(L):
    w = L.tensor(B, True)
    out = L.checkpoint(lambda x: (x * w).tanh(), L.tensor(A), use_reentrant=True)
    requires = out.requires_grad
    try:
        out.sum().backward()
    except RuntimeError:
        pass
    return requires, w.grad is None


@scenario
def reentrant_tensor_in_a_list_is_not_an_input(L):
    a = L.tensor(A, True)
    out = L.checkpoint(lambda xs: xs[0].tanh(), [a], use_reentrant=True)
    return out.requires_grad


@scenario
def reentrant_parameter_and_constant_argument(L):
    a, w = L.tensor(A, True), L.tensor(B, True)
    L.checkpoint(lambda x, k: (x * w).tanh() * k, a, 3.0, use_reentrant=True).sum().backward()
    return L.numpy(a.grad), L.numpy(w.grad)


@scenario
def reentrant_refuses_grad(L):
    a = L.tensor(A, True)
    L.grad(L.checkpoint(lambda x: x.tanh(), a, use_reentrant=True).sum(), [a])


@scenario
def reentrant_refuses_backward_inputs(L):
    a = L.tensor(A, True)
    L.checkpoint(lambda x: x.tanh(), a, use_reentrant=True).sum().backward(inputs=[a])


@scenario
def reentrant_retain_graph_twice(L):
    a = L.tensor(A, True)
    loss = L.checkpoint(lambda x: x.tanh() * x, a, use_reentrant=True).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    return L.numpy(a.grad)


# --- checkpoint_sequential ------------------------------------------------------------------
def _sequential(L, segments, use_reentrant, input_grad=True, use_grad=False):
    w = L.tensor(B, True)
    fs = [lambda x: x * w, lambda x: x.exp(), lambda x: x * x, lambda x: x.tanh(), lambda x: x + w]
    a = L.tensor(A, input_grad)
    out = L.checkpoint_sequential(fs, segments, a, use_reentrant=use_reentrant)
    if use_grad:
        return [L.numpy(g) for g in L.grad(out.sum(), [a, w])]
    out.sum().backward()
    return L.numpy(a.grad), L.numpy(w.grad)


for _seg in (1, 2, 3, 5):
    for _r in (True, False):
        SCENARIOS[f"sequential_{_seg}_segments_reentrant_{_r}"] = lambda L, s=_seg, r=_r: _sequential(L, s, r)
SCENARIOS["sequential_input_without_grad_reentrant"] = lambda L: _sequential(L, 2, True, input_grad=False)
SCENARIOS["sequential_input_without_grad"] = lambda L: _sequential(L, 2, False, input_grad=False)
SCENARIOS["sequential_grad"] = lambda L: _sequential(L, 3, False, use_grad=True)


# --- 0-d tensors, broadcasting, in-place edits -------------------------------------------------
@scenario
def zero_d_added_to_itself_and_checkpointed(L):
    y = L.tensor(2.0, True)
    (y + y).backward()
    first = L.numpy(y.grad).copy()
    L.checkpoint(lambda t: t * t + t.exp(), y, use_reentrant=False).backward()
    return first, L.numpy(y.grad)


@scenario
def zero_d_broadcast_against_a_matrix(L):
    y, x = L.tensor(2.0, True), L.tensor(A, True)
    L.checkpoint(lambda s, m: (m * s).tanh() / (s * s + 1.0), y, x, use_reentrant=False).sum().backward()
    return L.numpy(y.grad), L.numpy(x.grad)


@scenario
def broadcasting_inputs(L):
    a, b = L.tensor(C, True), L.tensor(D, True)
    out = L.checkpoint(lambda x, y: (x * y).exp() / (x * x + 3.0) - y, a, b, use_reentrant=False)
    out.sum().backward()
    return L.numpy(a.grad), L.numpy(b.grad)


@scenario
def input_edited_in_place_through_data_after_forward(L):
    a = L.tensor(A, True)
    out = L.checkpoint(lambda x: (x * x).tanh(), a, use_reentrant=False)
    L.set_data(a, B)                       # the recomputation sees the new values
    out.sum().backward()
    return L.numpy(a.grad)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_minigrad_checkpoint_behaves_like_torch(name):
    mine, theirs = outcome(SCENARIOS[name], MG), outcome(SCENARIOS[name], TORCH)
    assert mine[0] == theirs[0] and mine[2] == theirs[2], (mine, theirs)
    if mine[0] == "ok":
        assert same(mine[1], theirs[1]), (mine[1], theirs[1])
    elif name not in ANY_ERROR:
        assert mine[1] == theirs[1], (mine, theirs)


# Both raise, but not the same kind: with the check switched off, the recomputed arrays of
# another shape fail inside a backward formula (NumPy's ValueError, torch's RuntimeError).
ANY_ERROR = {"recomputation_shape_without_check"}


def test_op_names_catch_a_recomputation_that_torch_metadata_check_misses():
    """minigrad's determinism check compares each saved array's op as well as its shape and
    dtype: an op inserted before the last saved array, with the same shapes, is caught
    (torch compares shapes and dtypes only, and returns a silently wrong gradient)."""
    def scenario(L):
        a = L.tensor(A, True)
        runs = []

        def f(x):
            runs.append(1)
            y = x.tanh()
            if len(runs) > 1:
                y = y.exp()             # saves an array of the same shape and dtype
            return (y * y).sum()
        L.checkpoint(f, a, use_reentrant=False).backward()
        return L.numpy(a.grad)
    assert outcome(scenario, TORCH)[0] == "ok"
    with pytest.raises(mcp.CheckpointError, match=r"saved array #1: originally op 'mul'.*recomputed op 'exp'"):
        scenario(MG)


def test_the_side_by_side_scenarios_exercise_both_outcomes():
    """A guard on the harness: some scenarios must fail in both frameworks, some pass."""
    kinds = {outcome(SCENARIOS[n], MG)[0] for n in SCENARIOS}
    assert kinds == {"ok", "error"}
    assert outcome(SCENARIOS["recomputation_shape"], MG)[1] == "checkpoint"
    assert outcome(SCENARIOS["reentrant_inputs_without_grad_warn_and_give_no_gradient"], MG)[2] == \
        ["requires_grad=True"]
