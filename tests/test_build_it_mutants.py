"""Mutation suite for bookkit.build_it's checks: for every stub of Part I, independent
correct versions (written differently from the book's) must pass, and plausible wrong
versions (the mistakes a learner makes, the classes the checks once let through) must be
rejected with an error, never "agree"."""
from __future__ import annotations

import math
from collections import deque
from functools import cache

import numpy as np
import pytest
from marks import fast_every

import minigrad
from bookkit import build_it as B
from bookkit.yours import HandCheckpoint as BookHand
from minigrad import (
    Function,
    Tensor,
    enable_grad,
    memory,
    no_grad,
    plan,
    saved_tensors_hooks,
)
from minigrad.checkpoint import checkpoint
from minigrad.plan import Checkpointed, NestedSchedule, Taped
from minigrad.tensor import Context, node_of

from test_build_it import hook_checkpoint

# --- ch01: my_saved_bytes ------------------------------------------------------------------


def sb_formula(batch, widths):
    return 4 * batch * sum(widths[:-1])


def sb_loop(batch, widths):
    total = 0
    for i in range(len(widths) - 1):  # each Linear keeps its input (a Tanh's output)
        total += batch * widths[i] * np.dtype(np.float32).itemsize
    return total


SAVED_GOOD = [sb_formula, sb_loop]
SAVED_BAD = [
    lambda b, w: 4 * b * sum(w),                      # the output too
    lambda b, w: 4 * b * sum(w[1:]),                  # outputs instead of inputs
    lambda b, w: 4 * b * (sum(w[:-1]) + sum(w[1:-1])),  # Tanh's output counted twice
    lambda b, w: b * sum(w[:-1]),                     # elements, not bytes
    lambda b, w: 8 * b * sum(w[:-1]),                 # float64
    lambda b, w: 4 * sum(w[:-1]),                     # forgets the batch
]

# --- ch02: my_backward ---------------------------------------------------------------------


def _inputs(node):
    return [e for e in node.inputs if e is not None] if isinstance(node, Context) else []


def order_dfs(root):  # in-order recursive DFS (the book's)
    order, seen = [], set()

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for e in _inputs(n):
            visit(e)
        order.append(n)
    visit(root)
    return order[::-1]


def order_dfs_reversed(root):  # recursive DFS over reversed inputs: another valid order
    order, seen = [], set()

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for e in reversed(_inputs(n)):
            visit(e)
        order.append(n)
    visit(root)
    return order[::-1]


def order_iterative(root):  # iterative DFS with an explicit stack
    order, seen, stack = [], {id(root)}, [(root, iter(_inputs(root)))]
    while stack:
        n, it = stack[-1]
        for e in it:
            if id(e) not in seen:
                seen.add(id(e))
                stack.append((e, iter(_inputs(e))))
                break
        else:
            stack.pop()
            order.append(n)
    return order[::-1]


def order_kahn(root):  # Kahn: a node once every user has been visited
    users, seen, todo = {}, {id(root)}, [root]
    while todo:
        n = todo.pop()
        for e in _inputs(n):
            users[id(e)] = users.get(id(e), 0) + 1
            if id(e) not in seen:
                seen.add(id(e))
                todo.append(e)
    order, ready = [], deque([root])
    while ready:
        n = ready.popleft()
        order.append(n)
        for e in _inputs(n):
            users[id(e)] -= 1
            if users[id(e)] == 0:
                ready.append(e)
    return order


def order_bfs(root):  # wrong: breadth-first, a node may run before all its users
    order, seen, q = [], {id(root)}, deque([root])
    while q:
        n = q.popleft()
        order.append(n)
        for e in _inputs(n):
            if id(e) not in seen:
                seen.add(id(e))
                q.append(e)
    return order


def order_dfs_no_seen(root):  # wrong: no visited set, a shared node listed per path
    order = []

    def visit(n):
        for e in _inputs(n):
            visit(e)
        order.append(n)
    visit(root)
    return order[::-1]


def make_backward(order_fn, release="each", leaf="add", fanout="add", dedup=True):
    def my_backward(loss):
        root = node_of(loss)
        order = order_fn(root)
        if not dedup:  # every path visits again
            order = order + [n for n in order if isinstance(n, Context)][:1]
        grads = {id(root): np.ones_like(loss.data)}
        done = []
        for node in order:
            g = grads.pop(id(node), None)
            if g is None:
                continue
            if isinstance(node, Tensor):
                if leaf == "add" and node.grad is not None:
                    node.grad = node.grad + g
                else:
                    node.grad = g.copy()
                continue
            gi = node.fn.backward(node, g)
            if release == "each":
                node.release()
            else:
                done.append(node)
            gi = gi if isinstance(gi, tuple) else (gi,)
            for e, gx in zip(node.inputs, gi):
                if e is None or gx is None:
                    continue
                old = grads.get(id(e))
                grads[id(e)] = gx if old is None or fanout != "add" else old + gx
        if release == "end":
            for node in done:
                node.release()
    return my_backward


BACKWARD_GOOD = [make_backward(order_dfs), make_backward(order_dfs_reversed),
                 make_backward(order_iterative), make_backward(order_kahn),
                 lambda loss: loss.backward()]
BACKWARD_BAD = [
    make_backward(order_dfs, release="end"),    # releases only at the end of the pass
    make_backward(order_dfs, release="never"),  # never releases
    make_backward(order_dfs, leaf="set"),       # overwrites a leaf's .grad
    make_backward(order_dfs, fanout="set"),     # a fan-out keeps one branch's gradient
    make_backward(order_bfs),                   # not a topological order
    make_backward(order_dfs_no_seen),           # a shared node runs once per path
    lambda loss: None,                          # does nothing
]

# --- ch03: HandCheckpoint ------------------------------------------------------------------


class HandGrad(Function):  # independent: a copy of x is the leaf; the rebuild keeps fn
    @staticmethod
    def forward(ctx, x, fn):
        ctx.segment = fn  # (ctx.fn is the node's Function)
        ctx.save_for_backward(x)
        with no_grad():
            y = fn(Tensor(x))
        return y.data

    @staticmethod
    def backward(ctx, grad):
        x = ctx.saved_tensors[0]
        leaf = Tensor(x, requires_grad=True)
        with memory.phase("recompute"), enable_grad():
            out = ctx.segment(leaf)
        out.backward(grad)
        return leaf.grad, None


def hand_variant(phase_around_backward=False, phase=True, save_out=False, copy=False,
                 rebuilds=1, return_none=False):
    class Hand(Function):
        @staticmethod
        def forward(ctx, x, fn):
            with no_grad():
                y = fn(Tensor(x))
            ctx.save_for_backward(*((x, y.data) if save_out else (x,)))
            ctx.run = fn
            return y.data

        @staticmethod
        def backward(ctx, g):
            x = ctx.saved_tensors[0]
            for _ in range(rebuilds):
                xr = Tensor(x.copy() if copy else x, requires_grad=True)
                with enable_grad(), (memory.phase("recompute") if phase else no_ctx()):
                    y = ctx.run(xr)
                    if phase_around_backward:
                        y.backward(g)
            if not phase_around_backward:
                y.backward(g)
            return (None if return_none else xr.grad), None
    return Hand


class no_ctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


HAND_GOOD = [BookHand, HandGrad, hand_variant()]
HAND_BAD = [
    hand_variant(phase=False),                 # rebuild outside the recompute phase
    hand_variant(phase_around_backward=True),  # backward inside the recompute phase
    hand_variant(save_out=True),               # keeps the output too
    hand_variant(copy=True),                   # rebuilds from a copy of x
    hand_variant(rebuilds=2),                  # rebuilds twice
    hand_variant(return_none=True),            # x's gradient dropped
]

# --- ch04: my_sqrt_starts, my_checkpoint_sequential ----------------------------------------


def sqrt_book(n):
    k = math.isqrt(n - 1) + 1
    q, r = divmod(n, k)
    lengths = [q + 1] * r + [q] * (k - r)
    return [sum(lengths[:j]) for j in range(k)]


def sqrt_float(n):
    k = math.ceil(n ** 0.5 - 1e-9)
    starts, s = [], 0
    for j in range(k):
        starts.append(s)
        s += -(-(n - s) // (k - j))  # the remaining layers over the remaining segments
    return starts


SQRT_GOOD = [sqrt_book, sqrt_float]
def sqrt_short_first(n):  # balanced, but the shorter segments first
    k = math.isqrt(n - 1) + 1
    q, r = divmod(n, k)
    lengths = [q] * (k - r) + [q + 1] * r
    return [sum(lengths[:j]) for j in range(k)]


def sqrt_floor(n):  # floor(sqrt(n)) segments
    k = max(1, math.isqrt(n))
    q, r = divmod(n, k)
    lengths = [q + 1] * r + [q] * (k - r)
    return [sum(lengths[:j]) for j in range(k)]


SQRT_BAD = [
    lambda n: list(range(0, n, max(1, math.isqrt(n)))),  # floor step, ragged end
    sqrt_short_first,
    sqrt_floor,
    lambda n: sqrt_book(n)[:-1] if n > 2 else sqrt_book(n),  # one segment short
    lambda n: list(range(n)),                               # every layer a segment
]


def cs_book(layers, starts, x, ck):
    from bookkit.yours import my_checkpoint_sequential
    return my_checkpoint_sequential(layers, starts, x, ck)


def cs_recursive(layers, starts, x, ck):
    starts = list(starts)
    if len(starts) == 1:
        for layer in layers[starts[0]:]:
            x = layer(x)
        return x
    a, b = starts[0], starts[1]

    def seg(h, a=a, b=b):
        for layer in layers[a:b]:
            h = layer(h)
        return h
    return cs_recursive(layers, starts[1:], ck(seg, x), ck)


def cs_variant(last=False, first=True, plus_one=False):
    def cs(layers, starts, x, ck):
        bounds = list(starts) + [len(layers)]
        h = x
        for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            b2 = min(b + 1, len(layers)) if plus_one and b < len(layers) else b

            def seg(t, a=a, b=b2):
                for layer in layers[a:b]:
                    t = layer(t)
                return t
            is_last = b == len(layers)
            if (is_last and not last) or (k == 0 and not first):
                h = seg(h)
            else:
                h = ck(seg, h)
            if plus_one and b2 != b:
                h = layers[b](h) if False else h
        return h
    return cs


def hand(f, h):
    return BookHand.apply(h, f)


CS_GOOD = [(cs_book, hand), (cs_recursive, hand), (cs_variant(), hand),
           (cs_book, lambda f, h: HandGrad.apply(h, f))]
CS_BAD = [
    (cs_variant(last=True), hand),                 # the last segment checkpointed too
    (cs_variant(first=False), hand),               # the first segment kept
    (cs_book, lambda f, h: f(h)),                  # no checkpoint at all
    (lambda ls, s, x, ck: cs_book(ls, range(len(ls)), x, ck), hand),  # ignores starts
    (lambda ls, s, x, ck: cs_book(ls, [0], x, ck), hand),             # store everything
    (cs_book, lambda f, h: hand_variant(phase=False).apply(h, f)),    # no phase
]

# --- ch05: my_optimal_segments -------------------------------------------------------------


def dp_book(profile, budget_bytes=None):
    U, V, a = (t.tolist() for t in profile.tables())
    n, cost = profile.n, profile.cost

    @cache
    def peak(i, K):
        best = K + U[i][n]
        for j in range(i + 1, n):
            best = min(best, max(K + V[i][j], peak(j, K + a[i])))
        return best

    M = peak(0, 0) if budget_bytes is None else budget_bytes

    @cache
    def work(i, K):
        options = [(0, K + U[i][n], (i,))] if K + U[i][n] <= M else []
        for j in range(i + 1, n):
            if K + V[i][j] > M:
                continue
            rest = work(j, K + a[i])
            if rest is not None:
                options.append((sum(cost[i:j]) + rest[0], max(K + V[i][j], rest[1]),
                                (i,) + rest[2]))
        return min(options) if options else None
    if work(0, 0) is None:
        raise ValueError(f"no segment plan fits {M} bytes")
    return list(work(0, 0)[2])


def dp_brute(profile, budget_bytes=None):  # every plan: 2^(n-1) subsets
    import itertools
    n = profile.n
    plans = [[0] + list(c) for r in range(n) for c in itertools.combinations(range(1, n), r)]
    scored = [(plan.predict_peak(profile, s), plan.recompute_cost(profile, s), s)
              for s in plans]
    budget = min(p for p, _, _ in scored) if budget_bytes is None else budget_bytes
    return min((w, p, s) for p, w, s in scored if p <= budget)[2]


def dp_no_held(profile, budget_bytes=None):  # forgets the checkpoints already held
    U, V, a = (t.tolist() for t in profile.tables())
    n, cost = profile.n, profile.cost
    M = budget_bytes if budget_bytes is not None else plan.optimal_segments(
        profile).predicted_peak_activations

    @cache
    def work(i):
        options = [(0, (i,))] if U[i][n] <= M else []
        for j in range(i + 1, n):
            if V[i][j] <= M and work(j) is not None:
                options.append((sum(cost[i:j]) + work(j)[0], (i,) + work(j)[1]))
        return min(options) if options else None
    return list(work(0)[1]) if work(0) else [0]


DP_GOOD = [dp_book, dp_brute,
           lambda pr, b: plan.optimal_segments(pr, budget_bytes=b).starts]
DP_BAD = [
    lambda pr, b: [0],                                   # store everything
    lambda pr, b: plan.sqrt_segments(pr.n).starts,       # sqrt(n) whatever the budget
    lambda pr, b: plan.optimal_segments(pr).starts,      # the smallest peak, any budget
    lambda pr, b: list(range(pr.n)),                     # every layer a segment
    dp_no_held,
    lambda pr, b: dp_book(pr, None if b is None else b - 1),  # strict budget
]

# --- ch06: my_rotor, my_run_schedule -------------------------------------------------------
INF = float("inf")


def rotor_dp(drop=()):
    def my_rotor(profile, budget):
        n = profile.n
        a = list(profile.input_bytes) + [profile.output_bytes, 0]
        si = list(profile.saves_input) + [profile.loss_saves_input]
        so = list(profile.saves_output) + [False]
        own = list(profile.own_bytes) + [profile.loss_own_bytes]
        cost = list(profile.cost) + [0]

        @cache
        def opt(i, e, h, R):
            if R < 0:
                return INF, ()
            if i == e:
                return 0, ()
            d = (0 if "own" in drop else own[i]) + \
                (0 if "so" in drop else so[i] * a[i + 1]) + \
                (0 if "si" in drop else si[i] * (1 - h) * a[i])
            work, rest = opt(i + 1, e, so[i], R - d)
            best = (work, (Taped(i),) + rest)
            R_ck = R - (0 if "ck" in drop else (1 - h) * a[i])
            for j in range(i + 1, e):
                w_in, inner = opt(i, j, 1, R_ck)
                w_out, rest = opt(j, e, 0, R_ck)
                work = (0 if "cost" in drop else sum(cost[i:j])) + w_in + w_out
                if work < best[0]:
                    best = (work, (Checkpointed(i, j, inner),) + rest)
            return best
        work, items = opt(0, n + 1, 0, budget)
        if work == INF:
            raise ValueError(f"no nested schedule fits {budget} bytes")
        return NestedSchedule(n=n, items=items[:-1])
    return my_rotor


ROTOR_GOOD = [rotor_dp(), lambda pr, b: plan.rotor(pr, budget_bytes=b)]
ROTOR_BAD = [
    rotor_dp(drop=("so",)),     # without the taped-output term
    rotor_dp(drop=("si",)),     # without the taped-input term
    rotor_dp(drop=("own",)),    # without the other saved arrays
    rotor_dp(drop=("ck",)),     # a checkpoint costs no memory
    rotor_dp(drop=("cost",)),   # recomputation is free
    lambda pr, b: NestedSchedule(n=pr.n, items=tuple(Taped(i) for i in range(pr.n))),
    lambda pr, b: plan.rotor(pr),  # the smallest peak whatever the budget
]


def run_hand(layers, schedule, x):
    def run(items, h):
        for it in items:
            if isinstance(it, Taped):
                h = layers[it.layer](h)
            else:
                h = BookHand.apply(h, lambda t, it=it: run(it.inner, t))
        return h
    return run(schedule.items, x)


def run_library_ck(layers, schedule, x):  # independent: a stack, the library's checkpoint
    def seg(items):
        def f(h):
            for it in items:
                h = layers[it.layer](h) if isinstance(it, Taped) else \
                    checkpoint(seg(it.inner), h, use_reentrant=True)
            return h
        return f
    return seg(schedule.items)(x)


def run_variant(flatten=False, inner_plain=False, ck_taped=False, no_phase=False):
    ck_cls = hand_variant(phase=False) if no_phase else BookHand

    def my_run(layers, schedule, x):
        def run(items, h, depth=0):
            for it in items:
                if isinstance(it, Taped):
                    h = ck_cls.apply(h, layers[it.layer]) if ck_taped else layers[it.layer](h)
                elif inner_plain and depth > 0:
                    h = run(it.inner, h, depth + 1)
                elif flatten:
                    def f(t, it=it):
                        for layer in layers[it.start:it.stop]:
                            t = layer(t)
                        return t
                    h = ck_cls.apply(h, f)
                else:
                    h = ck_cls.apply(h, lambda t, it=it, d=depth: run(it.inner, t, d + 1))
            return h
        return run(schedule.items, x)
    return my_run


RUN_GOOD = [run_hand, run_library_ck, run_variant()]
RUN_BAD = [
    run_variant(flatten=True),       # a checkpoint's inner schedule ignored
    run_variant(inner_plain=True),   # nested checkpoints run taped
    run_variant(ck_taped=True),      # taped layers checkpointed
    run_variant(no_phase=True),      # rebuild outside the recompute phase
    lambda ls, s, x: run_hand(ls, NestedSchedule(
        n=s.n, items=tuple(Taped(i) for i in range(s.n))), x),  # store everything
    lambda ls, s, x: run_hand(ls, s, Tensor(x.data)),           # x's gradient lost
]

# --- ch08: my_hook_checkpoint --------------------------------------------------------------


hook_book = hook_checkpoint  # the book's solution, as tests/test_build_it.py writes it


class _Frame:  # independent: an object per call, a dict of rebuilt arrays
    def __init__(self, fn, x):
        self.fn, self.x, self.n, self.arrays = fn, x, 0, None

    def pack(self, array):
        self.n += 1
        return self.n

    def unpack(self, k):
        if self.arrays is None:
            self.arrays, seen = {}, [0]

            def keep(a):
                seen[0] += 1
                self.arrays[seen[0]] = a
                return a
            with memory.phase("recompute"), enable_grad(), \
                    saved_tensors_hooks(keep, lambda a: a):
                self.fn(Tensor(self.x.data, requires_grad=self.x.requires_grad))
        return self.arrays.pop(k)  # handed out once: freed as the backward goes


def hook_frame(fn, x):
    f = _Frame(fn, x)
    with saved_tensors_hooks(f.pack, f.unpack):
        return fn(x)


def hook_rng(fn, x):
    state, calls = minigrad.random.get_rng_state(), []

    def replayed(t):
        if not calls:
            calls.append(1)
            return fn(t)
        with minigrad.random.fork_rng():
            minigrad.random.set_rng_state(state)
            return fn(t)
    return hook_book(replayed, x)


def hook_stash(fn, x):  # keeps every array in a list: never recomputes
    stash = []

    def pack(a):
        stash.append(a)
        return len(stash) - 1
    with saved_tensors_hooks(pack, lambda k: stash[k]):
        return fn(x)


def hook_every_unpack(fn, x):  # rebuilds on every unpack
    count = [0]

    def pack(a):
        count[0] += 1
        return count[0] - 1

    def unpack(k):
        rebuilt = []
        with enable_grad(), memory.phase("recompute"), \
                saved_tensors_hooks(lambda a: rebuilt.append(a) or a, lambda a: a):
            fn(Tensor(x.data, requires_grad=x.requires_grad))
        return rebuilt[k]
    with saved_tensors_hooks(pack, unpack):
        return fn(x)


_NEVER_FREED = []


def hook_outside_never_free(fn, x):  # rebuilds outside the phase, keeps it all forever
    count, rebuilt = [0], []
    _NEVER_FREED.append(rebuilt)

    def pack(a):
        count[0] += 1
        return count[0] - 1

    def unpack(k):
        if not rebuilt:
            with enable_grad(), \
                    saved_tensors_hooks(lambda a: rebuilt.append(a) or a, lambda a: a):
                fn(Tensor(x.data, requires_grad=x.requires_grad))
        return rebuilt[k]
    with saved_tensors_hooks(pack, unpack):
        return fn(x)


def hook_reversed(fn, x):  # hands out the rebuilt arrays in the wrong order
    rebuilt, count = [], [0]

    def pack(a):
        count[0] += 1
        return count[0] - 1

    def unpack(k):
        if not rebuilt:
            with enable_grad(), memory.phase("recompute"), \
                    saved_tensors_hooks(lambda a: rebuilt.append(a) or a, lambda a: a):
                fn(Tensor(x.data, requires_grad=x.requires_grad))
        return rebuilt[-1 - k]
    with saved_tensors_hooks(pack, unpack):
        return fn(x)


def hook_stash_and_rebuild(fn, x):  # rebuilds in the phase, but hands out kept arrays
    stash, rebuilt = [], []

    def pack(a):
        stash.append(a)
        return len(stash) - 1

    def unpack(k):
        if not rebuilt:
            with enable_grad(), memory.phase("recompute"), \
                    saved_tensors_hooks(lambda a: rebuilt.append(a) or a, lambda a: a):
                fn(Tensor(x.data, requires_grad=x.requires_grad))
        return stash[k]
    with saved_tensors_hooks(pack, unpack):
        return fn(x)


def hook_never_free(fn, x):  # the book's, but every rebuilt list kept forever
    rebuilt, count = [], [0]
    _NEVER_FREED.append(rebuilt)

    def pack(a):
        count[0] += 1
        return count[0] - 1

    def unpack(k):
        if not rebuilt:
            with enable_grad(), memory.phase("recompute"), \
                    saved_tensors_hooks(lambda a: rebuilt.append(a) or a, lambda a: a):
                fn(Tensor(x.data, requires_grad=x.requires_grad))
        return rebuilt[k]
    with saved_tensors_hooks(pack, unpack):
        return fn(x)


HOOK_GOOD = [hook_book, hook_frame, hook_rng]
HOOK_BAD = [
    hook_stash,
    hook_every_unpack,
    hook_outside_never_free,
    hook_reversed,
    hook_stash_and_rebuild,
    hook_never_free,
    lambda fn, x: fn(x),                                          # no checkpoint
    lambda fn, x: checkpoint(fn, Tensor(x.data), use_reentrant=True),  # x's gradient lost
]

# --- the suite -----------------------------------------------------------------------------
SUITE = {
    "saved_bytes": (B.check_saved_bytes, [(f,) for f in SAVED_GOOD],
                    [(f,) for f in SAVED_BAD]),
    "backward": (B.check_backward, [(f,) for f in BACKWARD_GOOD],
                 [(f,) for f in BACKWARD_BAD]),
    "hand_checkpoint": (B.check_hand_checkpoint, [(c,) for c in HAND_GOOD],
                        [(c,) for c in HAND_BAD]),
    "sqrt_starts": (B.check_sqrt_starts, [(f,) for f in SQRT_GOOD],
                    [(f,) for f in SQRT_BAD]),
    "checkpoint_sequential": (B.check_checkpoint_sequential, CS_GOOD, CS_BAD),
    "segment_dp": (B.check_segment_dp, [(f,) for f in DP_GOOD], [(f,) for f in DP_BAD]),
    "rotor": (B.check_rotor, [(f,) for f in ROTOR_GOOD], [(f,) for f in ROTOR_BAD]),
    "schedule_executor": (B.check_schedule_executor, [(f,) for f in RUN_GOOD],
                          [(f,) for f in RUN_BAD]),
    "hook_checkpoint": (B.check_hook_checkpoint, [(f,) for f in HOOK_GOOD],
                        [(f,) for f in HOOK_BAD]),
}
GOOD = [(k, i) for k, (_, good, _) in SUITE.items() for i in range(len(good))]
BAD = [(k, i) for k, (_, _, bad) in SUITE.items() for i in range(len(bad))]


@pytest.mark.parametrize("name, i", fast_every(GOOD, 3), ids=[f"{k}-good{i}" for k, i in GOOD])
def test_correct_version_passes(name, i, capsys):
    check, good, _ = SUITE[name]
    check(*good[i])
    assert "agree with minigrad" in capsys.readouterr().out


@pytest.mark.parametrize("name, i", fast_every(BAD, 3), ids=[f"{k}-bad{i}" for k, i in BAD])
def test_wrong_version_fails(name, i, capsys):
    check, _, bad = SUITE[name]
    with pytest.raises(Exception) as err:
        check(*bad[i])
    assert not isinstance(err.value, NotImplementedError)
    assert "agree" not in capsys.readouterr().out


def test_every_stub_has_enough_versions():
    for name, (_, good, bad) in SUITE.items():
        assert len(good) >= 2 and len(bad) >= 5, name


def test_dropout_chain_needs_the_random_state(capsys):
    """With dropout in the segment, a rebuild that forgets the random state fails."""
    B.check_hook_checkpoint(hook_rng, dropout=True)
    assert "agree" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="differs: largest difference"):
        B.check_hook_checkpoint(hook_book, dropout=True)


def test_stub_inside_a_dependency_is_named(capsys):
    """A written my_checkpoint_sequential over a stubbed HandCheckpoint: not "not
    written yet", but the dependency named."""
    class Stub(Function):
        @staticmethod
        def forward(ctx, x, fn):
            raise NotImplementedError

        @staticmethod
        def backward(ctx, g):
            raise NotImplementedError
    B.check_checkpoint_sequential(cs_book, lambda f, h: Stub.apply(h, f))
    out = capsys.readouterr().out
    assert "not written yet" not in out and "Stub.forward" in out and "skipped" in out


def test_gradient_hint_names_the_largest_difference():
    a = [np.zeros(3, np.float32), np.array([1.0, 2.0, 3.0], np.float32)]
    b = [np.zeros(3, np.float32), np.array([1.0, 2.5, 3.0], np.float32)]
    hint = B._grad_diff(b, a)
    assert "gradient 1" in hint and "0.5" in hint
    assert B._grad_diff([a[1] * (1 + 1e-7)], [a[1]]) is None


def test_book_backward_handles_a_400_block_chain():
    """ch02's solution (the %%solution cell) orders a deep chain without RecursionError
    and passes the check."""
    import json

    from bookkit.chains import block_chain
    from bookpaths import ROOT
    nb = json.loads((ROOT / "notebooks" / "ch02_tiny_autograd.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
                and "\n%%solution\n" in "".join(c["source"])
                and "def my_backward" in "".join(c["source"]))
    ns = {"np": np, "Tensor": Tensor, "Context": Context, "node_of": node_of,
          "check_backward": lambda f: None}
    exec(cell.replace("\n%%solution\n", "\n", 1), ns)  # its #@title line: a comment
    layers = block_chain([4] * 401, 4)
    x = Tensor(minigrad.random.randn(2, 4), requires_grad=True)
    h = x
    for layer in layers:
        h = layer(h)
    ns["my_backward"](h.sum())
    assert x.grad is not None and x.grad.shape == (2, 4)
