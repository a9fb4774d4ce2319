"""Checks for Part I's "build it" exercises: the reader's version against minigrad's.

Part I has the reader write every mechanism (the engine's backward, a checkpoint by
hand, ``checkpoint_sequential``, the segment DP, rotor and its nested executor, the
hook-based checkpoint). Each chapter gives a stub that raises ``NotImplementedError``
and one call to a checker here. A checker runs the reader's function on several cases
and compares it with the library's on what the book measures: gradients to float32
rounding (a valid order may sum in another order), the ledger's peak of saved activations
to the byte, FLOPs by phase exactly, bytes actually held, or a planner's peak and work. It
prints one line when every case agrees; while the reader's own function still raises
``NotImplementedError`` it prints one line saying the check was skipped, so a notebook runs
top to bottom (a stub the function calls, such as an unwritten ``HandCheckpoint``, is named
as such); both return None, so a cell shows only that line. A disagreement raises
``AssertionError`` naming the first case that fails and, for gradients, the largest
difference.

Example:
    >>> from bookkit.build_it import check_sqrt_starts
    >>> def my_sqrt_starts(n):
    ...     raise NotImplementedError
    >>> check_sqrt_starts(my_sqrt_starts)
    my_sqrt_starts: not written yet (NotImplementedError); check skipped
"""
from __future__ import annotations

import functools
import gc
import tracemalloc

import numpy as np

import minigrad
import minigrad.ops as F
from minigrad import Tensor, memory, plan
from minigrad.checkpoint import checkpoint, checkpoint_sequential

__all__ = [
    "check_backward",
    "check_checkpoint_sequential",
    "check_hand_checkpoint",
    "check_hook_checkpoint",
    "check_rotor",
    "check_saved_bytes",
    "check_schedule_executor",
    "check_segment_dp",
    "check_sqrt_starts",
]


def _own_codes(obj):
    """The code objects of the reader's function (or of the methods of their class)."""
    funcs = [obj] if not isinstance(obj, type) else [
        getattr(v, "__func__", v) for v in vars(obj).values()]
    return {f.__code__ for f in funcs if hasattr(f, "__code__")}


def _raiser(exc):
    """The code object of the function that raised ``exc`` (the innermost frame)."""
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code


def _checker(name):
    """Run a checker: one line on success, one line when the reader's code is a stub."""
    def wrap(body):
        @functools.wraps(body)
        def run(*args, **kwargs):
            try:
                cases = body(*args, **kwargs)
            except NotImplementedError as exc:
                code = _raiser(exc)
                if code in _own_codes(args[0]):
                    print(f"{name}: not written yet (NotImplementedError); check skipped")
                else:  # the reader's function is written; something it calls is not
                    print(f"{name}: check skipped: {code.co_qualname} (which it calls) "
                          "raised NotImplementedError")
                return
            print(f"{name}: all {cases} cases agree with minigrad")
            from bookkit.yours import save_source
            saved = save_source(name, args[0])  # only what a %%yours cell defined
            if saved is not None:
                print(f"{name}: saved to {saved}; later chapters run yours")
            return
        return run
    return wrap


# --- small chains -----------------------------------------------------------------------
def _blocks(widths, hidden, seed, act="tanh"):
    from bookkit.chains import block_chain
    return block_chain(widths, hidden, seed=seed, activation=act)


def _params(layers):
    return [p for layer in layers for p in layer.parameters()]


def _measure(layers, x, run, loss=None):
    """(peak activation bytes, FLOPs by phase, gradients, peak bytes of every category)
    of one step of ``run``."""
    loss = loss or (lambda y: y.sum())
    for p in _params(layers):
        p.grad = None
    x.grad = None
    with memory.track(record_timeline=False) as m:
        loss(run(layers, x)).backward()
    grads = [None if p.grad is None else p.grad.copy() for p in _params(layers)]
    if x.requires_grad:
        grads.append(None if x.grad is None else x.grad.copy())
    return (int(m.peak["activations"] - m.start["activations"]), dict(m.flops), grads,
            int(m.peak["total"] - m.start["total"]))


def _grad_diff(mine, ref):
    """None when ``mine`` matches ``ref`` to float32 rounding (another summation order
    may differ in the last bits); otherwise a hint: which gradient, how far off."""
    if len(mine) != len(ref):
        return f"{len(mine)} gradients, expected {len(ref)}"
    for k, (u, v) in enumerate(zip(mine, ref)):
        if u is None:
            return f"gradient {k} is None"
        u, v = np.asarray(u), np.asarray(v)
        if u.shape != v.shape:
            return f"gradient {k} has shape {u.shape}, expected {v.shape}"
        diff = float(np.max(np.abs(u - v), initial=0.0))
        scale = float(np.max(np.abs(v), initial=0.0))
        if not np.isfinite(diff) or diff > 1e-5 * max(scale, 1.0):
            return (f"gradient {k} differs: largest difference {diff:.3g} "
                    f"(largest entry {scale:.3g})")
    return None


def _same_grads(a, b):
    return _grad_diff(a, b) is None


def _compare(where, mine, lib, phases=("forward", "recompute", "backward"), total=False):
    """Assert one step of the reader's matches the library's: gradients, peak, FLOPs
    (and with ``total``, the peak of all bytes: gradients made inside the recompute phase
    are booked there)."""
    hint = _grad_diff(mine[2], lib[2])
    assert hint is None, f"{where}: {hint}"
    assert mine[0] == lib[0], f"{where}: peak {mine[0]} bytes, library {lib[0]}"
    for ph in phases:
        got, want = mine[1].get(ph, 0), lib[1].get(ph, 0)
        assert got == want, (f"{where}: {got} FLOPs booked as {ph!r}, library {want}"
                             + (" (rebuild under memory.phase('recompute'), backward "
                                "outside it)" if ph != "forward" else ""))
    if total:
        assert mine[3] == lib[3], (
            f"{where}: peak of all bytes {mine[3]}, library {lib[3]} (only the rebuild "
            "runs under memory.phase('recompute'); back-propagate outside it)")


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
class _Probe(minigrad.Function):
    """Identity on the chain's input; its backward (the last node to run) notes the saved
    activations still held then: a backward that releases node by node holds none."""
    held = []

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        _Probe.held.append(memory.live_bytes()["activations"])
        return g


@_checker("my_backward")
def check_backward(my_backward):
    """In "A tiny autograd that shows its memory": ``my_backward(loss)`` fills ``.grad`` of
    every leaf like ``loss.backward()`` (to float32 rounding: any topological order),
    accumulates into ``.grad`` over two calls, and releases each node's saved arrays once
    its backward has run: by the time the first op's backward runs, no other node's saved
    arrays are held, and none at the end."""
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
            where = f"model {seed}, fan-out {reuse}"
            results = []
            for run in (lambda t: t.backward(), my_backward):
                for p in model.parameters():
                    p.grad = None
                x.grad = None
                steps = []
                for _ in range(2):  # two steps without zeroing: .grad accumulates
                    _Probe.held.clear()
                    with memory.track() as m:
                        # every op depends on the probe's output: its backward runs last
                        xp = _Probe.apply(x)
                        y = model(xp)
                        # reuse: xp feeds the loss twice (a fan-out the order must respect)
                        loss = (y * y).sum() + ((xp * xp).sum() if reuse else 0.0)
                        run(loss)
                        left = memory.live_bytes()["activations"] - m.start["activations"]
                    held = [h - m.start["activations"] for h in _Probe.held]
                    grads = [p.grad for p in model.parameters()] + [x.grad]
                    assert all(g is not None for g in grads), \
                        f"{where}: some .grad is still None"
                    steps.append(([g.copy() for g in grads], left, held))
                    del y, loss, xp
                results.append(steps)
            for k, ((ref, _, ref_held), (mine, left, held)) in enumerate(zip(*results)):
                hint = _grad_diff(mine, ref)
                what = "after one backward" if k == 0 else \
                    "after two backward calls (add into .grad, do not overwrite it)"
                assert hint is None, f"{where}, {what}: {hint}"
                assert left == 0, (f"{where}: {left} bytes of saved activations still "
                                   "held after your backward (release them)")
                assert len(held) == 1, (f"{where}: the first op's backward ran "
                                        f"{len(held)} times (once per node)")
                assert held == ref_held, (
                    f"{where}: {held[0]} bytes of saved activations held when the first "
                    f"op's backward ran, loss.backward() {ref_held[0]} (release each "
                    "node's saved arrays right after its backward, not at the end)")
            cases += 1
    return cases


# --- Dropping and rebuilding --------------------------------------------------------------
class _PhaseProbe(minigrad.Function):
    """Identity inside a segment; its backward notes the ledger's phase then (the
    recompute phase covers the rebuild only: back-propagation is backward work)."""
    seen = []

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        _PhaseProbe.seen.append(memory._LEDGER.current_phase())
        return g


@_checker("HandCheckpoint")
def check_hand_checkpoint(hand_checkpoint_cls):
    """In "Dropping and rebuilding": ``HandCheckpoint.apply(x, fn)`` against
    ``checkpoint(fn, x, use_reentrant=True)``: gradients, peak of saved activations to the
    byte, FLOPs by phase (one rebuild of the segment in the ``"recompute"`` phase, its
    backward outside it)."""
    cases = 0
    for layers, x in _chains()[:3]:
        if not x.requires_grad:
            continue
        for a, b in ((1, 3), (0, 2), (2, len(layers) - 1)):
            inner, run = _segment_in_chain(layers, a, b)

            def seg(h, inner=inner):
                return inner(_PhaseProbe.apply(h))
            phases = []
            for ck in (lambda h: hand_checkpoint_cls.apply(h, seg),
                       lambda h: checkpoint(seg, h, use_reentrant=True)):
                _PhaseProbe.seen.clear()
                phases.append((_measure(layers, x, run(ck)), list(_PhaseProbe.seen)))
            (mine, seen), (lib, lib_seen) = phases
            where = f"chain of {len(layers)}, segment [{a}, {b})"
            _compare(where, mine, lib, total=True)
            assert seen == lib_seen, (
                f"{where}: the segment's backward ran in phase {seen}, library "
                f"{lib_seen} (only the rebuild runs under memory.phase('recompute'))")
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
    use_reentrant=True)``: gradients, peak to the byte, FLOPs by phase."""
    cases = 0
    for layers, x in _chains()[:3]:
        n = len(layers)
        for starts in ([0], [0, n - 1], list(plan.sqrt_segments(n).starts),
                       list(range(n))):
            mine = _measure(layers, x, lambda ls, h: my_checkpoint_sequential(
                ls, starts, h, checkpoint_fn))
            lib = _measure(layers, x, lambda ls, h: checkpoint_sequential(
                ls, starts, h, use_reentrant=True))
            _compare(f"{n} layers, starts {starts}", mine, lib)
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
        # the plan at the smallest peak, executed: it checkpoints something
        from bookkit.chains import measure_chain_step
        starts = list(my_optimal_segments(profile, None))
        assert len(starts) > 1, (f"{profile.n} layers, no budget: yours {starts} stores "
                                 "everything; the smallest peak needs checkpoints")
        mine = (plan.predict_peak(profile, starts), plan.recompute_cost(profile, starts))
        st = measure_chain_step(layers, x, starts, loss=loss)
        assert (st.peak_activations, st.recompute_flops) == mine, \
            f"{profile.n} layers: executed {starts}, measured differs from the model"
        cases += 1
    return cases


# --- Beyond one level ---------------------------------------------------------------------
def _rotor_profiles():
    """Profiles for rotor: block chains (each layer saves its input), single-op chains
    whose activations save their output, with a loss that saves its input and a target,
    and a hand-made profile mixing all the terms of the recurrence."""
    from minigrad import nn
    out = []
    for layers, x, loss in _profiles()[:3]:
        out.append(plan.profile_chain(layers[:7], x, loss=None))
    minigrad.random.manual_seed(4)
    widths = [8, 32, 32, 8, 48, 16]
    ops = []
    for i in range(len(widths) - 1):
        ops += [nn.Linear(widths[i], widths[i + 1]), nn.Tanh() if i % 2 else nn.ReLU()]
    x = Tensor(minigrad.random.randn(4, widths[0]), requires_grad=True)
    t = Tensor(minigrad.random.randn(4, widths[-1]))
    out.append(plan.profile_chain(ops, x, loss=lambda y: F.mse_loss(y, t)))
    out.append(plan.ChainProfile(
        input_bytes=(64, 256, 64, 128, 64, 192, 64), output_bytes=96,
        saves_input=(True, False, True, True, False, True, True),
        saves_output=(False, True, False, True, True, False, True),
        own_bytes=(0, 32, 0, 96, 0, 16, 8), cost=(10, 40, 10, 30, 20, 10, 50),
        loss_saves_input=True, loss_own_bytes=96, loss_cost=5))
    return out


@_checker("my_rotor")
def check_rotor(my_rotor):
    """In "Beyond one level": ``my_rotor(profile, budget_bytes)`` returns a `NestedSchedule`
    that fits the budget and recomputes exactly ``plan.rotor``'s FLOPs, at every budget
    tried, on profiles with and without a loss, with layers that save their input, their
    output (the taped-output term) and other arrays."""
    from minigrad.plan.nested import (
        NestedSchedule,
        schedule_peak,
        schedule_recompute_cost,
    )
    cases = 0
    for profile in _rotor_profiles():
        low = plan.rotor(profile).predicted_peak_activations
        high = plan.predict_peak(profile, [0])
        for budget in sorted({int(b) for b in np.linspace(low, high, 6)}):
            s = my_rotor(profile, budget)
            lossy = profile.loss_saves_input or profile.loss_own_bytes
            where = (f"{profile.n} layers ({'with' if lossy else 'no'}"
                     f" loss, saves_output {list(map(int, profile.saves_output))}), "
                     f"budget {budget}")
            assert isinstance(s, NestedSchedule), \
                f"{where}: my_rotor returned {type(s).__name__}"
            peak, work = schedule_peak(profile, s), schedule_recompute_cost(profile, s)
            ref = plan.rotor(profile, budget_bytes=budget).recompute_cost
            assert peak <= budget, f"{where}: your schedule peaks at {peak}"
            assert work == ref, f"{where}: yours recomputes {work}, rotor {ref}"
            cases += 1
    return cases


@_checker("my_run_schedule")
def check_schedule_executor(my_run_schedule):
    """In "Beyond one level": ``my_run_schedule(layers, schedule, x)`` runs a nested
    schedule like ``checkpoint_sequential(layers, schedule, x)``: gradients, peak of saved
    activations to the byte, FLOPs by phase."""
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
            _compare(f"{n} layers, schedule {s.nested}", mine, lib)
            cases += 1
    return cases


# --- When recomputation lies --------------------------------------------------------------
def _numpy_traced_bytes() -> int:
    """The bytes of NumPy's data buffers tracemalloc traces now (NumPy's own domain:
    Python's objects, which other libraries in the process allocate and free, are left
    out)."""
    only_numpy = tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)
    return sum(t.size for t in tracemalloc.take_snapshot().filter_traces([only_numpy]).traces)


def _held_bytes(step):
    """NumPy bytes still allocated after ``step()`` (traced by tracemalloc), less those of
    the arrays or tensors it returns (kept alive, with their graphs, until counted)."""
    gc.collect()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        base = _numpy_traced_bytes()
        kept = step()
        gc.collect()
        held = _numpy_traced_bytes() - base
        held -= sum(getattr(a, "data", a).nbytes for a in kept if a is not None)
        del kept
    finally:
        if started:
            tracemalloc.stop()
    return held


def _hook_chains(dropout):
    """Chains for the hook checkpoint: the small ones, then a wide one whose arrays
    (64 KiB each) stand out from Python's own allocations; with ``dropout``, a chain with
    dropout inside the segment (the rebuild must draw the same masks)."""
    from minigrad import nn
    out = _chains()
    minigrad.random.manual_seed(5)
    wide = _blocks([64] * 5, 256, seed=5)
    out.append((wide, Tensor(minigrad.random.randn(64, 64), requires_grad=True)))
    if dropout:
        minigrad.random.manual_seed(6)
        drop = [nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Dropout(0.5),
                              nn.Linear(32, 16)) for _ in range(4)]
        out.append((drop, Tensor(minigrad.random.randn(8, 16), requires_grad=True)))
    return out


@_checker("my_hook_checkpoint")
def check_hook_checkpoint(my_hook_checkpoint, *, dropout=False):
    """In "When recomputation lies": ``my_hook_checkpoint(fn, x)`` (built on
    ``saved_tensors_hooks``) against ``checkpoint(fn, x)``: gradients (also when ``x`` needs
    no grad), FLOPs by phase (one rebuild, under ``memory.phase("recompute")``), no array
    saved inside ``fn`` stored after the forward pass (by the ledger and by the bytes NumPy
    still holds), and nothing left held once the step is over. ``dropout=True`` adds a chain
    with dropout inside the segment: the rebuild must replay the random state."""
    cases = 0
    for layers, x in _hook_chains(dropout):
        for a, b in ((0, 2), (1, len(layers))):
            seg, run = _segment_in_chain(layers, a, b)
            state = minigrad.random.get_rng_state()
            mine = _measure(layers, x, run(lambda h: my_hook_checkpoint(seg, h)))
            minigrad.random.set_rng_state(state)
            lib = _measure(layers, x, run(lambda h: checkpoint(seg, h)))
            where = (f"chain of {len(layers)}, segment [{a}, {b}), input "
                     f"{'with' if x.requires_grad else 'without'} grad")
            hint = _grad_diff(mine[2], lib[2])
            assert hint is None, f"{where}: {hint}"
            for ph in ("forward", "recompute", "backward"):
                got, want = mine[1].get(ph, 0), lib[1].get(ph, 0)
                assert got == want, (
                    f"{where}: {got} FLOPs booked as {ph!r}, library {want} (rebuild "
                    "once, on the first unpack, under memory.phase('recompute'))")
            if a == 0:
                with memory.track() as m:
                    y = my_hook_checkpoint(seg, x)
                    kept = memory.live_bytes()["activations"] - m.start["activations"]
                del y
                assert kept == 0, f"{where}: {kept} bytes stored after the forward pass"
            if a == 0 and x.shape[0] == 64:  # the wide chain: arrays of 16 to 64 KiB
                held = {}
                for who, ck in (("yours", my_hook_checkpoint), ("library", checkpoint)):
                    def step(ck=ck):
                        for p in _params(layers):
                            p.grad = None
                        x.grad = None
                        ck(seg, x).sum().backward()
                        return [p.grad for p in _params(layers)] + [x.grad]
                    step()  # warm up: caches and lazily built objects do not count
                    held[who] = _held_bytes(lambda ck=ck: [ck(seg, x)])  # its graph alive
                    held[who + " after"] = _held_bytes(step)
                slack = 16384  # Python objects: closures, lists, nodes, a random state
                assert held["yours"] <= held["library"] + slack, (
                    f"{where}: {held['yours']} bytes of arrays held after the forward "
                    f"pass, library {held['library']} (keep positions, not the arrays)")
                assert held["yours after"] <= held["library after"] + slack, (
                    f"{where}: {held['yours after']} bytes of arrays still held after "
                    f"the step, library {held['library after']} (free the rebuilt arrays)")
            cases += 1
    return cases
