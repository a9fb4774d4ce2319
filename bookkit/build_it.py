"""Checks for Part I's "build it" exercises: the reader's version against minigrad's.

Part I has the reader write every mechanism (the engine's backward, a checkpoint by
hand, ``checkpoint_sequential``, the segment DP, rotor and its nested executor, the
hook-based checkpoint). Each chapter gives a stub that raises ``NotImplementedError``
and one call to a checker here. A checker runs the reader's function on several cases
and compares it with the library's on what the book measures: gradients bit for bit,
the ledger's peak of saved activations to the byte, recomputed FLOPs exactly, or a
planner's peak and work. It prints one line when every case agrees; while the stub still raises
``NotImplementedError`` it prints one line saying the check was skipped, so a notebook
runs top to bottom (both return None, so a cell shows only that line); a disagreement raises
``AssertionError`` naming the case.

Example:
    >>> from bookkit.build_it import check_sqrt_starts
    >>> def my_sqrt_starts(n):
    ...     raise NotImplementedError
    >>> check_sqrt_starts(my_sqrt_starts)
    my_sqrt_starts: not written yet (NotImplementedError); check skipped
"""
from __future__ import annotations

import functools

import numpy as np

import minigrad
import minigrad.ops as F
from minigrad import Tensor, memory, plan
from minigrad.checkpoint import checkpoint, checkpoint_sequential

__all__ = ["check_backward", "check_hand_checkpoint", "check_sqrt_starts",
           "check_checkpoint_sequential", "check_segment_dp", "check_rotor",
           "check_schedule_executor", "check_hook_checkpoint", "check_saved_bytes"]


class _Skip(Exception):
    pass


def _checker(name):
    """Run a checker: one line on success, one line when the reader's code is a stub."""
    def wrap(body):
        @functools.wraps(body)
        def run(*args, **kwargs):
            try:
                cases = body(*args, **kwargs)
            except NotImplementedError:
                print(f"{name}: not written yet (NotImplementedError); check skipped")
                return None
            print(f"{name}: all {cases} cases agree with minigrad")
            return None
        return run
    return wrap


# --- small chains -----------------------------------------------------------------------
def _blocks(widths, hidden, seed, act="tanh"):
    from bookkit.chains import block_chain
    return block_chain(widths, hidden, seed=seed, activation=act)


def _params(layers):
    return [p for layer in layers for p in layer.parameters()]


def _measure(layers, x, run, loss=None):
    """(peak activation bytes, recomputed FLOPs, gradients) of one step of ``run``."""
    loss = loss or (lambda y: y.sum())
    for p in _params(layers):
        p.grad = None
    x.grad = None
    with memory.track(record_timeline=False) as m:
        loss(run(layers, x)).backward()
    grads = [p.grad.copy() for p in _params(layers)]
    if x.requires_grad:
        grads.append(x.grad.copy())
    return (int(m.peak["activations"] - m.start["activations"]), m.flops["recompute"],
            grads)


def _same_grads(a, b):
    return len(a) == len(b) and all(np.array_equal(u, v) for u, v in zip(a, b))


def _segment_in_chain(layers, a, b):
    """``seg(h)`` applies ``layers[a:b]``; ``run(ck)`` is the chain (as ``_measure``
    runs it) with ``ck(h)`` in place of that segment."""
    def seg(h):
        for layer in layers[a:b]:
            h = layer(h)
        return h

    def run(ck):
        def go(ls, h):
            for layer in ls[:a]:
                h = layer(h)
            h = ck(h)
            for layer in ls[b:]:
                h = layer(h)
            return h
        return go
    return seg, run


def _chains():
    """A few chains with inputs: equal blocks, mixed widths, an input without grad."""
    minigrad.random.manual_seed(1)
    out = []
    for widths, hidden, grad in (([8] * 7, 32, True), ([8, 32, 8, 16, 8, 8], 24, True),
                                 ([16] * 10, 48, True), ([8] * 5, 16, False)):
        layers = _blocks(widths, hidden, seed=len(widths))
        x = Tensor(minigrad.random.randn(4, widths[0]), requires_grad=grad)
        out.append((layers, x))
    return out


# --- Where training memory goes -----------------------------------------------------------
@_checker("my_saved_bytes")
def check_saved_bytes(my_saved_bytes):
    """In "Where training memory goes": ``my_saved_bytes(batch, widths)`` predicts the bytes
    of saved activations at the end of the forward pass of an MLP ``Linear -> Tanh -> ... ->
    Linear`` (float32, loss ``y.sum()``); compared with the ledger."""
    from minigrad import nn
    cases = 0
    for batch, widths in ((4, [8, 16, 8]), (32, [16, 256, 16]), (3, [5, 7, 9, 11]),
                          (64, [784, 128, 128, 10])):
        minigrad.random.manual_seed(0)
        mods = []
        for i in range(len(widths) - 1):
            mods.append(nn.Linear(widths[i], widths[i + 1]))
            if i < len(widths) - 2:
                mods.append(nn.Tanh())
        model = nn.Sequential(*mods)
        x = Tensor(minigrad.random.randn(batch, widths[0]))
        with memory.track() as m:
            y = model(x).sum()
            kept = memory.live_bytes()["activations"] - m.start["activations"]
            y.backward()
        mine = my_saved_bytes(batch, widths)
        assert mine == kept, f"batch {batch}, widths {widths}: yours {mine}, ledger {kept}"
        cases += 1
    return cases


# --- A tiny autograd that shows its memory ------------------------------------------------
@_checker("my_backward")
def check_backward(my_backward):
    """In "A tiny autograd that shows its memory": ``my_backward(loss)`` fills ``.grad`` of
    every leaf like ``loss.backward()`` and frees each node's saved arrays once its backward
    has run (the ledger's saved activations end at zero)."""
    from minigrad import nn
    cases = 0
    for seed, build in enumerate((
            lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)),
            lambda: nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6), nn.Tanh(),
                                  nn.Linear(6, 2)))):
        for reuse in (False, True):
            minigrad.random.manual_seed(seed)
            model = build()
            x = Tensor(minigrad.random.randn(5, model[0].in_features), requires_grad=True)
            results = []
            for run in (lambda t: t.backward(), my_backward):
                for p in model.parameters():
                    p.grad = None
                x.grad = None
                with memory.track() as m:
                    y = model(x)
                    # reuse: x feeds the loss twice (a fan-out the order must respect)
                    loss = (y * y).sum() + ((x * x).sum() if reuse else 0.0)
                    run(loss)
                    left = memory.live_bytes()["activations"] - m.start["activations"]
                grads = [p.grad for p in model.parameters()] + [x.grad]
                assert all(g is not None for g in grads), \
                    f"model {seed}, fan-out {reuse}: some .grad is still None"
                results.append(([g.copy() for g in grads], left))
            (ref, _), (mine, left) = results
            assert _same_grads(ref, mine), f"model {seed}, fan-out {reuse}: gradients differ"
            assert left == 0, (f"model {seed}, fan-out {reuse}: {left} bytes of saved "
                               "activations still held after your backward (release them)")
            cases += 1
    return cases


# --- Dropping and rebuilding --------------------------------------------------------------
@_checker("HandCheckpoint")
def check_hand_checkpoint(hand_checkpoint_cls):
    """In "Dropping and rebuilding": ``HandCheckpoint.apply(x, fn)`` against
    ``checkpoint(fn, x, use_reentrant=True)``: gradients bit for bit, peak of saved
    activations to the byte, recomputed FLOPs (one rebuild of the segment, in the
    ``"recompute"`` phase)."""
    cases = 0
    for layers, x in _chains()[:3]:
        if not x.requires_grad:
            continue
        for a, b in ((1, 3), (0, 2), (2, len(layers) - 1)):
            seg, run = _segment_in_chain(layers, a, b)
            mine = _measure(layers, x, run(lambda h: hand_checkpoint_cls.apply(h, seg)))
            lib = _measure(layers, x, run(lambda h: checkpoint(seg, h, use_reentrant=True)))
            where = f"chain of {len(layers)}, segment [{a}, {b})"
            assert _same_grads(mine[2], lib[2]), f"{where}: gradients differ"
            assert mine[0] == lib[0], f"{where}: peak {mine[0]} bytes, library {lib[0]}"
            assert mine[1] == lib[1], (f"{where}: recomputed {mine[1]} FLOPs, library "
                                       f"{lib[1]} (rebuild under memory.phase('recompute'))")
            cases += 1
    return cases


# --- The square-root trick ----------------------------------------------------------------
@_checker("my_sqrt_starts")
def check_sqrt_starts(my_sqrt_starts):
    """In "The square-root trick": ``my_sqrt_starts(n)``: ceil(sqrt(n)) segments whose
    lengths differ by at most one, longer ones first, as
    ``plan.sqrt_segments(n).starts``."""
    cases = 0
    for n in range(1, 130):
        mine = [int(s) for s in my_sqrt_starts(n)]
        ref = list(plan.sqrt_segments(n).starts)
        assert mine == ref, f"n = {n}: yours {mine}, plan.sqrt_segments {ref}"
        cases += 1
    return cases


@_checker("my_checkpoint_sequential")
def check_checkpoint_sequential(my_checkpoint_sequential, checkpoint_fn):
    """In "The square-root trick": ``my_checkpoint_sequential(layers, starts, x,
    checkpoint_fn)`` against ``checkpoint_sequential(layers, starts, x,
    use_reentrant=True)``: gradients bit for bit, peak to the byte, recomputed FLOPs."""
    cases = 0
    for layers, x in _chains()[:3]:
        n = len(layers)
        for starts in ([0], [0, n - 1], list(plan.sqrt_segments(n).starts),
                       list(range(n))):
            mine = _measure(layers, x, lambda ls, h: my_checkpoint_sequential(
                ls, starts, h, checkpoint_fn))
            lib = _measure(layers, x, lambda ls, h: checkpoint_sequential(
                ls, starts, h, use_reentrant=True))
            where = f"{n} layers, starts {starts}"
            assert _same_grads(mine[2], lib[2]), f"{where}: gradients differ"
            assert mine[0] == lib[0], f"{where}: peak {mine[0]} bytes, library {lib[0]}"
            assert mine[1] == lib[1], f"{where}: recomputed {mine[1]} FLOPs, library {lib[1]}"
            cases += 1
    return cases


# --- Choosing where to checkpoint ---------------------------------------------------------
def _profiles():
    from bookkit.chains import waist_chain
    out = []
    for widths in ([8, 8, 64, 64, 8, 8, 64, 8, 8], [16, 8, 32, 8, 8, 64, 16],
                   [8] * 9):
        layers = _blocks(widths, [4 * w for w in widths[:-1]], seed=3, act="relu")
        minigrad.random.manual_seed(2)
        x = Tensor(minigrad.random.randn(4, widths[0]), requires_grad=True)
        t = Tensor(minigrad.random.randn(4, widths[-1]))
        out.append((layers, x, lambda y, t=t: F.mse_loss(y, t)))
    w = waist_chain(16)
    out.append((w.layers[:12], w.x, None))
    return out


@_checker("my_optimal_segments")
def check_segment_dp(my_optimal_segments):
    """In "Choosing where to checkpoint": ``my_optimal_segments(profile,
    budget_bytes=None)`` returns segment starts whose (peak, recomputed FLOPs) equal
    ``plan.optimal_segments``' for no budget and for budgets up to storing everything, and
    whose plan, executed, measures that peak."""
    cases = 0
    for layers, x, loss in _profiles():
        profile = plan.profile_chain(layers, x, loss=loss)
        low = plan.optimal_segments(profile).predicted_peak_activations
        high = plan.predict_peak(profile, [0])
        for budget in [None] + [int(b) for b in np.linspace(low, high, 5)]:
            starts = list(my_optimal_segments(profile, budget))
            ref = plan.optimal_segments(profile, budget_bytes=budget)
            mine = (plan.predict_peak(profile, starts), plan.recompute_cost(profile, starts))
            want = (ref.predicted_peak_activations, ref.recompute_cost)
            assert mine == want, (f"{profile.n} layers, budget {budget}: yours (peak, FLOPs) "
                                  f"{mine}, optimal_segments {want}")
            cases += 1
        from bookkit.chains import measure_chain_step
        st = measure_chain_step(layers, x, starts, loss=loss)
        assert (st.peak_activations, st.recompute_flops) == mine, \
            f"{profile.n} layers: executed {starts}, measured differs from the model"
    return cases


# --- Beyond one level ---------------------------------------------------------------------
@_checker("my_rotor")
def check_rotor(my_rotor):
    """In "Beyond one level": ``my_rotor(profile, budget_bytes)`` returns a `NestedSchedule`
    that fits the budget and recomputes exactly ``plan.rotor``'s FLOPs, at every budget
    tried."""
    from minigrad.plan.nested import NestedSchedule, schedule_peak, schedule_recompute_cost
    cases = 0
    for layers, x, loss in _profiles()[:3]:
        profile = plan.profile_chain(layers[:7], x, loss=None)
        low = plan.rotor(profile).predicted_peak_activations
        high = plan.predict_peak(profile, [0])
        for budget in sorted({int(b) for b in np.linspace(low, high, 6)}):
            s = my_rotor(profile, budget)
            assert isinstance(s, NestedSchedule), f"my_rotor returned {type(s).__name__}"
            peak, work = schedule_peak(profile, s), schedule_recompute_cost(profile, s)
            ref = plan.rotor(profile, budget_bytes=budget).recompute_cost
            assert peak <= budget, f"budget {budget}: your schedule peaks at {peak}"
            assert work == ref, f"budget {budget}: yours recomputes {work}, rotor {ref}"
            cases += 1
    return cases


@_checker("my_run_schedule")
def check_schedule_executor(my_run_schedule):
    """In "Beyond one level": ``my_run_schedule(layers, schedule, x)`` runs a nested
    schedule like ``checkpoint_sequential(layers, schedule, x)``: gradients bit for bit,
    peak of saved activations to the byte, recomputed FLOPs."""
    cases = 0
    for layers, x in _chains()[:3]:
        n = len(layers)
        profile = plan.profile_chain(layers, x)
        low = plan.rotor(profile).predicted_peak_activations
        high = plan.predict_peak(profile, [0])
        schedules = [plan.rotor(profile, budget_bytes=int(b))
                     for b in np.linspace(low, high, 3)]
        schedules.append(plan.revolve(n, 2))
        for s in schedules:
            s = s if hasattr(s, "items") else __import__(
                "minigrad.plan.nested", fromlist=["from_revolve"]).from_revolve(s)
            mine = _measure(layers, x, lambda ls, h: my_run_schedule(ls, s, h))
            lib = _measure(layers, x, lambda ls, h: checkpoint_sequential(ls, s, h))
            where = f"{n} layers, schedule {s.nested}"
            assert _same_grads(mine[2], lib[2]), f"{where}: gradients differ"
            assert mine[0] == lib[0], f"{where}: peak {mine[0]} bytes, library {lib[0]}"
            assert mine[1] == lib[1], f"{where}: recomputed {mine[1]} FLOPs, library {lib[1]}"
            cases += 1
    return cases


# --- When recomputation lies --------------------------------------------------------------
@_checker("my_hook_checkpoint")
def check_hook_checkpoint(my_hook_checkpoint):
    """In "When recomputation lies": ``my_hook_checkpoint(fn, x)`` (built on
    ``saved_tensors_hooks``) against ``checkpoint(fn, x)``: gradients bit for bit (also when
    ``x`` needs no grad), and no array saved inside ``fn`` stays stored after the forward
    pass."""
    cases = 0
    for layers, x in _chains():
        for a, b in ((0, 2), (1, len(layers))):
            seg, run = _segment_in_chain(layers, a, b)
            mine = _measure(layers, x, run(lambda h: my_hook_checkpoint(seg, h)))
            lib = _measure(layers, x, run(lambda h: checkpoint(seg, h)))
            where = (f"chain of {len(layers)}, segment [{a}, {b}), input "
                     f"{'with' if x.requires_grad else 'without'} grad")
            assert _same_grads(mine[2], lib[2]), f"{where}: gradients differ"
            with memory.track() as m:
                y = my_hook_checkpoint(seg, x) if a == 0 else None
                kept = memory.live_bytes()["activations"] - m.start["activations"]
            del y
            assert kept == 0, f"{where}: {kept} bytes stored after the forward pass"
            cases += 1
    return cases
