"""plan.graph and plan.checkmate: the traced DAG, Checkmate's program against an exhaustive
search on tiny DAGs, each improvement leaving the optimum unchanged, the lower bound, the
LP relaxation, and agreement with rotor on a chain within the two memory models."""
import functools
import itertools
import subprocess
import sys

import numpy as np
import pytest

import minigrad
import minigrad.ops as F
from minigrad import memory, nn, plan
from minigrad.plan import checkmate
from minigrad.plan.graph import GraphProfile, chain_graph

pytest.importorskip("scipy")


# --- an exhaustive search, written from the model's definition ---------------------------
def brute_force(g: GraphProfile, budget: int):
    """Least recomputed FLOPs over every schedule of the model (stage t computes node t after
    any valid set of forward recomputations; any subset of what is present may be kept),
    with Checkmate's memory: kept values, plus each node computed in the stage, a value
    freed right after its last reader in the stage unless kept. None if nothing fits."""
    N, nf, M, users = g.n_nodes, g.n_forward, g.value_bytes, g.users()

    @functools.cache
    def best(t, keep):
        if t == N:
            return 0
        keep_set = set(keep)
        candidates = [i for i in range(min(t, nf)) if t >= nf and i not in keep_set]
        result = None
        for r in range(len(candidates) + 1):
            for rec in itertools.combinations(candidates, r):
                order = list(rec) + [t]
                have, ok = set(keep_set), True
                for k in order:
                    if any(d not in have for d in g.deps[k]):
                        ok = False
                        break
                    have.add(k)
                if not ok:
                    continue
                present = sorted(have)
                for m in range(len(present) + 1):
                    for nxt in itertools.combinations(present, m):
                        nxt_set = set(nxt)
                        if any(g.out_buffer[i] != i and g.out_buffer[i] not in keep_set
                               for i in keep_set if i < nf):
                            continue
                        live = set(keep_set)
                        mem = g.const_bytes + sum(M[i] for i in live)
                        peak = 0
                        for pos, k in enumerate(order):
                            live.add(k)
                            mem += M[k]
                            peak = max(peak, mem)
                            later = order[pos + 1:]
                            for i in set(g.deps[k]) | {k}:
                                if i not in nxt_set and not any(j in later for j in users[i]):
                                    live.discard(i)
                                    mem -= M[i]
                        if peak > budget:
                            continue
                        rest = best(t + 1, tuple(sorted(nxt_set)))
                        if rest is None:
                            continue
                        cost = sum(g.flops[k] for k in rec) + rest
                        result = cost if result is None else min(result, cost)
        return result

    return best(0, ())


def random_training_graph(rng, nf):
    """A random forward DAG of ``nf`` ops and its backward nodes, as the engine builds
    them: backward node b(j) reads the gradients of j's readers' backward nodes, j's own
    value, and (at random) some of j's inputs."""
    deps = []
    for j in range(nf):
        k = rng.integers(0, min(j, 2) + 1)
        deps.append(tuple(sorted(rng.choice(j, size=k, replace=False).tolist())) if j else ())
    deps[nf - 1] = tuple(sorted(set(deps[nf - 1]) | ({nf - 2} if nf > 1 else set())))
    users = [[j for j in range(nf) if i in deps[j]] for i in range(nf)]
    order = list(reversed(range(nf)))
    stage = {j: nf + k for k, j in enumerate(order)}
    names = [f"f{j}" for j in range(nf)] + [f"f{j}.bwd" for j in order]
    vb = [int(b) for b in rng.integers(1, 6, nf)]
    fl = [int(c) for c in rng.integers(1, 9, nf)]
    for j in order:
        d = {stage[u] for u in users[j]} | {j}
        d |= {i for i in deps[j] if rng.random() < 0.6}
        deps.append(tuple(sorted(d)))
        vb.append(int(rng.integers(1, 4)))
        fl.append(int(rng.integers(1, 9)))
    return GraphProfile(names=tuple(names), n_forward=nf, deps=tuple(deps), value_bytes=tuple(vb),
                        flops=tuple(fl), backward_of=tuple(order), out_buffer=tuple(range(nf)),
                        buffer_bytes=tuple(vb[:nf]), private_bytes=(0,) * nf)


def _budgets(g):
    lo, hi = checkmate.lower_bound(g), plan.store_all(g).predicted_peak_bytes
    return sorted({lo, (lo + hi) // 2, hi, lo + 1})


def _cases():
    rng = np.random.default_rng(7)
    graphs = [chain_graph([3, 5, 2], [2, 3, 4]), chain_graph([4, 1, 4], [5, 1, 1],
                                                            saves_input=False)]
    graphs += [random_training_graph(rng, nf) for nf in (3, 3, 4, 4)]
    return [(g, b) for g in graphs for b in _budgets(g)]


CASES = _cases()
VARIANTS = [(), ("prune",), ("forced",), ("tight_free",), ("dominance",),
            checkmate.IMPROVEMENTS]


def test_the_program_equals_brute_force_and_each_improvement_keeps_the_optimum():
    wants = [brute_force(g, budget) for g, budget in CASES]
    assert sum(1 for w in wants if w) >= 4  # cases that must recompute
    for (g, budget), want in zip(CASES, wants):
        for improvements in VARIANTS:
            try:
                got = plan.remat(g, budget, time_limit_s=10, improvements=improvements)
            except ValueError:
                got = None
            if want is None:
                assert got is None, (g.names, budget, improvements)
                continue
            assert got is not None and got.optimal, (budget, improvements)
            assert got.recompute_flops == want, (g.deps, budget, improvements)
            assert got.predicted_peak_bytes <= budget
            peak, cost = checkmate.simulate(g, got.recompute, got.keep)
            assert (peak, cost) == (got.predicted_peak_bytes, got.recompute_flops)


def test_improvements_shrink_the_program():
    g = random_training_graph(np.random.default_rng(3), 5)
    sizes = {}
    for imp in VARIANTS:
        P, _, _ = checkmate.build_program(g, 10**6, imp)
        sizes[imp] = (len(P.binary), sum(P.binary))
    assert sizes[checkmate.IMPROVEMENTS][1] < sizes[("prune",)][1] < sizes[()][1]
    assert sizes[("tight_free",)][1] < sizes[()][1]


def test_lower_bound_is_checked_first_and_named():
    g = chain_graph([3, 5, 2], [2, 3, 4])
    bound = checkmate.lower_bound(g)
    with pytest.raises(ValueError, match=f"lower bound {bound} bytes"):
        plan.remat(g, bound - 1)
    # the bound is a true bound: the exhaustive search finds nothing below it
    assert brute_force(g, bound - 1) is None


def test_store_all_is_the_zero_cost_schedule_and_remat_reaches_it():
    g = random_training_graph(np.random.default_rng(11), 4)
    sa = plan.store_all(g)
    s = plan.remat(g, sa.predicted_peak_bytes)
    assert s.recompute_flops == 0 and s.optimal and s.gap == 0


def test_relaxation_is_a_lower_bound_and_its_rounding_fits():
    for g, budget in CASES:
        try:
            exact = plan.remat(g, budget, time_limit_s=10)
        except ValueError:
            continue
        try:
            rounded = plan.remat(g, budget, relax=True)
        except ValueError as e:  # a rounding may find nothing; it says so
            assert "rounding" in str(e)
            continue
        assert not rounded.optimal and rounded.method == "lp-rounded"
        assert rounded.lower_bound_flops <= exact.recompute_flops + 1e-6
        assert rounded.recompute_flops >= exact.recompute_flops
        assert rounded.predicted_peak_bytes <= budget


def test_bad_arguments():
    g = chain_graph([3, 5, 2], [2, 3, 4])
    with pytest.raises(TypeError, match="GraphProfile"):
        plan.remat("graph", 100)
    chain = plan.ChainProfile(input_bytes=(4, 4), output_bytes=4,
                              saves_input=(True, True),
                              saves_output=(False, False),
                              own_bytes=(0, 0), cost=(1, 1))
    for planner in (plan.store_all, plan.lower_bound):  # a chain: named
        with pytest.raises(TypeError, match="ChainProfile.*plan.rotor"):
            planner(chain)
    with pytest.raises(TypeError, match="integer"):
        plan.remat(g, 10.5)
    with pytest.raises(ValueError, match="unknown improvements"):
        plan.remat(g, 100, improvements=("fast",))
    with pytest.raises(ValueError, match="topological"):
        GraphProfile(names=("a", "b"), n_forward=2, deps=((1,), ()), value_bytes=(1, 1),
                     flops=(1, 1))


# --- the traced graph ------------------------------------------------------------------
def _mlp_step(seed=0, batch=5):
    minigrad.random.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(),
                          nn.Linear(8, 4))
    rng = np.random.default_rng(seed)
    x = minigrad.Tensor(rng.standard_normal((batch, 8)).astype(np.float32))
    y = minigrad.Tensor(rng.standard_normal((batch, 4)).astype(np.float32))
    return model, (lambda x: F.mse_loss(model(x), y)), x


def test_trace_counts_what_the_step_runs():
    model, step, x = _mlp_step()
    g = plan.trace_graph(step, x)
    assert g.names[: g.n_forward] == ("linear", "relu", "linear", "tanh", "linear", "mseloss")
    assert g.n_nodes == 2 * g.n_forward
    with memory.track() as m:
        loss = step(x)
        loss.backward()
    assert g.forward_flops == m.flops["forward"]
    assert g.backward_flops == m.flops["backward"]
    assert all(p.grad is not None for p in model.parameters())
    # tracing changed no gradient and no random state
    before = [p.grad.copy() for p in model.parameters()]
    plan.trace_graph(step, x)
    assert all(np.array_equal(a, p.grad) for a, p in zip(before, model.parameters()))
    # each linear's output is 5 x out floats; the backward of a linear reads its input
    assert g.value_bytes[0] == 5 * 16 * 4
    lin2_bwd = g.names.index("linear.bwd", g.n_forward + 2)
    assert 1 in g.deps[lin2_bwd] or 3 in g.deps[lin2_bwd]


def test_trace_sees_residual_and_attention_fan_out():
    minigrad.random.manual_seed(0)
    block = nn.TransformerBlock(8, 2)
    x = minigrad.Tensor(np.random.default_rng(0).standard_normal((1, 4, 8)).astype(np.float32),
                        requires_grad=True)
    g = plan.trace_graph(lambda x: block(x).sum(), x)
    users = g.users()
    fwd = g.names[: g.n_forward]
    first_add = fwd.index("add")
    # the residual stream after attention is read by ln2 and by the second add
    readers = [fwd[j] for j in users[first_add] if j < g.n_forward]
    assert "layernorm" in readers and "add" in readers
    # attention reads q, k and v, three views of one qkv buffer
    sdpa = fwd.index("scaleddotproductattention")
    assert len([d for d in g.deps[sdpa] if fwd[d] == "getitem"]) == 3
    qkv = fwd.index("linear")
    assert all(g.out_buffer[d] == qkv for d in g.deps[sdpa])


def test_trace_rejects_a_step_without_a_loss():
    model, _, x = _mlp_step()
    with pytest.raises(TypeError, match="one-element Tensor"):
        plan.trace_graph(lambda x: model(x), x)


def test_scipy_loads_only_when_the_graph_planner_runs():
    code = ("import sys, minigrad; from minigrad import plan; "
            "g = plan.chain_graph([4] * 6, [1] * 6); b = plan.lower_bound(g); "
            "assert plan.store_all(g).predicted_peak_bytes > b; plan.remat(g, 10**6); "
            "assert 'scipy' not in sys.modules; plan.remat(g, b); "
            "assert 'scipy' in sys.modules; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def _deep_chain_step(depth=5, width=16, batch=32):
    minigrad.random.manual_seed(2)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.Tanh()]
    model = nn.Sequential(*layers)
    rng = np.random.default_rng(2)
    x = minigrad.Tensor(rng.standard_normal((batch, width)).astype(np.float32))
    y = minigrad.Tensor(rng.standard_normal((batch, width)).astype(np.float32))
    return model, (lambda x: F.mse_loss(model(x), y)), x


# --- chains: the graph optimum and rotor ------------------------------------------------------
def test_on_a_chain_the_graph_optimum_agrees_with_rotor_within_the_two_models():
    """rotor plans a chain in the ledger's model (saved arrays only). The program, on the
    same graph without gradients (`without_gradients`), still counts during the forward
    pass the output an op is computing and the input the user's code holds, which the
    ledger sees as temporaries: at most two ops' values, delta. Every rotor schedule is a
    schedule of the program (op by op), so the graph optimum at budget B + delta costs no
    more than rotor's plan at B; and run, it keeps the ledger within that budget."""
    from minigrad import remat
    model, step, x = _deep_chain_step()
    g = plan.trace_graph(step, x)
    target = next(c.cell_contents for c in step.__closure__
                  if isinstance(c.cell_contents, minigrad.Tensor))
    profile = plan.profile_chain(list(model), x, loss=lambda h: F.mse_loss(h, target))
    frontier = plan.rotor_frontier(profile)
    delta = 2 * max(g.value_bytes[: g.n_forward])
    saved = g.without_gradients()
    cheaper = 0
    for cost, peak, _ in frontier:
        budget = int(peak) + delta
        s = plan.remat(saved, budget, time_limit_s=60)
        assert s.optimal and s.recompute_flops <= cost
        cheaper += s.recompute_flops < cost
        for p in model.parameters():
            p.grad = None
        with memory.track() as m:
            remat.run(s, step, x)
        assert m.peak["activations"] == s.predicted_activation_bytes <= budget
        assert m.flops["recompute"] == s.recompute_flops
    assert len(frontier) >= 5 and cheaper >= 1
    # Checkmate's model counts gradients too: the same budgets buy less
    full = plan.store_all(g).predicted_peak_bytes
    assert full > plan.store_all(saved).predicted_peak_bytes


def test_time_limit_returns_a_valid_schedule_with_its_proven_gap():
    from bookkit.graphs import gpt_stack
    model = gpt_stack(2, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    budget = int(0.8 * plan.store_all(g).predicted_peak_bytes)
    s = plan.remat(g, budget, time_limit_s=0.5)
    assert not s.optimal and s.method in ("milp", "fallback", "greedy")
    assert 0 < s.gap <= 1 and s.lower_bound_flops <= s.recompute_flops
    assert checkmate.simulate(g, s.recompute, s.keep) == (s.predicted_peak_bytes,
                                                          s.recompute_flops)
    assert s.predicted_peak_bytes <= budget


def test_keeping_and_the_chain_view():
    _, step, x = _deep_chain_step(depth=3)
    g = plan.trace_graph(step, x)
    everything = plan.keeping(g, range(g.n_forward))
    assert everything.recompute_flops == 0
    assert everything.predicted_peak_bytes == plan.store_all(g).predicted_peak_bytes
    nothing = plan.keeping(g, [])
    assert nothing.recompute_flops > 0
    assert nothing.predicted_peak_bytes < everything.predicted_peak_bytes
    with pytest.raises(ValueError, match="not forward nodes"):
        plan.keeping(g, [g.n_forward])
    # on a chain of ops the chain view is the graph itself (same prices)
    chain = g.chain_view()
    for kept in ([], [1, 3], range(0, g.n_forward, 2)):
        a, b = plan.keeping(chain, kept), plan.keeping(g, kept)
        assert (a.recompute_flops, a.predicted_peak_bytes) == (
            b.recompute_flops, b.predicted_peak_bytes)


def test_optimal_means_proven_and_gap_is_the_solvers():
    for g, budget in CASES[:8]:
        try:
            s = plan.remat(g, budget, time_limit_s=10)
        except ValueError:
            continue
        assert s.optimal == (s.gap == 0.0)
        if s.optimal:
            assert s.lower_bound_flops == s.recompute_flops
        assert s.solver in ("highs", "")


def test_a_looser_budget_never_gets_a_costlier_plan_silently():
    from bookkit.graphs import gpt_stack
    model = gpt_stack(2, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    lo, hi = checkmate.lower_bound(g), plan.store_all(g).predicted_peak_bytes
    tight = plan.remat(g, int(lo + 0.3 * (hi - lo)), time_limit_s=2)
    loose = plan.remat(g, int(lo + 0.35 * (hi - lo)), time_limit_s=0.05)
    assert loose.recompute_flops <= tight.recompute_flops
    if loose.method == "start":
        assert "tighter budget" in loose.note
    # a start given by hand: a schedule of the same graph, used where it fits
    again = plan.trace_graph(model.step, model.x)
    given = plan.remat(again, int(lo + 0.4 * (hi - lo)), time_limit_s=0.05, start=tight)
    assert given.recompute_flops <= tight.recompute_flops
    with pytest.raises(ValueError, match="same graph"):
        plan.remat(g, hi - 1, start=plan.store_all(chain_graph([1, 2], [1, 1])))


def test_no_schedule_in_time_is_a_clear_error_not_a_bare_one():
    from bookkit.graphs import gpt_stack
    model = gpt_stack(2, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    lo = checkmate.lower_bound(g)
    with pytest.raises(checkmate.NoScheduleFound, match="lower bound 2,976 B.*more time"):
        plan.remat(g, lo, time_limit_s=0.05)


def test_the_repr_is_short_numbers_first_with_op_names():
    from bookkit.graphs import gpt_stack
    model = gpt_stack(1, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    lo, hi = checkmate.lower_bound(g), plan.store_all(g).predicted_peak_bytes
    s = plan.remat(g, (lo + hi) // 2, time_limit_s=30)
    text = repr(s)
    assert text.startswith("GraphSchedule(peak ") and len(text) < 400
    assert "frozenset" not in text and "FLOPs" in text
    assert any(g.names[i] in text for i, _ in s.recomputed_nodes)


def test_tracing_leaves_the_model_and_its_random_streams_as_it_found_them():
    """trace_graph is a dry run: BatchNorm's running statistics and batch count, a dropout's
    own Generator, the default generator and NumPy's global one are all as before, and the
    traced ops are those of a real step."""
    import minigrad
    from minigrad import Tensor, nn
    import minigrad.ops as F

    gen = minigrad.random.Generator(5)
    lin, bn = nn.Linear(4, 6), nn.BatchNorm1d(6)

    def step(x):
        return F.dropout(bn(lin(x)), 0.5, generator=gen).sum()

    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    state = (bn.running_mean.data.copy(), bn.running_var.data.copy(), bn.num_batches_tracked,
             gen.get_state(), minigrad.random.get_rng_state(), np.random.get_state()[1].copy())
    g = minigrad.plan.trace_graph(step, x)
    assert np.array_equal(bn.running_mean.data, state[0])
    assert np.array_equal(bn.running_var.data, state[1])
    assert bn.num_batches_tracked == state[2]
    assert gen.get_state() == state[3] and minigrad.random.get_rng_state() == state[4]
    assert np.array_equal(np.random.get_state()[1], state[5])
    # what the trace measured is a real step: the same ops, and a real step does update
    assert g.names[:g.n_forward] == ("linear", "batchnorm", "dropout", "sum")
    step(x)
    assert bn.num_batches_tracked == 1 and not np.array_equal(bn.running_mean.data, state[0])
    assert gen.get_state() != state[3]


def test_a_copied_generator_is_put_back_too():
    import copy

    import minigrad
    from minigrad import Tensor, nn
    import minigrad.ops as F

    gen = copy.deepcopy(minigrad.random.Generator(9))  # made without __init__
    lin = nn.Linear(4, 4)
    x = Tensor(np.ones((2, 4), np.float32))
    before = gen.get_state()
    minigrad.plan.trace_graph(lambda x: F.dropout(lin(x), 0.5, generator=gen).sum(), x)
    assert gen.get_state() == before


# --- CP-SAT on the same program (OR-Tools is optional) ------------------------------------
def _more_random_cases():
    rng = np.random.default_rng(2023)
    graphs = [random_training_graph(rng, nf) for nf in (3, 4, 4, 5)]
    return [(g, b) for g in graphs for b in _budgets(g)]


def test_cp_sat_proves_the_same_optimum_as_highs_and_the_exhaustive_search():
    pytest.importorskip("ortools")
    cases = CASES + _more_random_cases()
    wants = [brute_force(g, budget) for g, budget in cases]
    assert sum(1 for w in wants if w) >= 8  # cases that must recompute
    solved = 0
    for (g, budget), want in zip(cases, wants):
        for improvements in VARIANTS:
            got = {}
            for solver in ("highs", "cp-sat"):
                fresh = GraphProfile(**{f: getattr(g, f) for f in g.__dataclass_fields__})
                try:  # a fresh graph: no plan returned earlier serves as a start
                    got[solver] = plan.remat(fresh, budget, time_limit_s=10,
                                             improvements=improvements, solver=solver)
                except ValueError:
                    got[solver] = None
            s = got["cp-sat"]
            if want is None:
                assert s is None and got["highs"] is None, (g.names, budget, improvements)
                continue
            assert s is not None and s.optimal and s.gap == 0.0, (budget, improvements)
            assert s.recompute_flops == want == got["highs"].recompute_flops, (
                g.deps, budget, improvements)
            assert s.lower_bound_flops == want
            assert s.solver == ("" if s.method == "store-all" else "cp-sat")  # no solve
            solved += s.solver == "cp-sat"
            assert s.predicted_peak_bytes <= budget
            assert checkmate.simulate(g, s.recompute, s.keep) == (
                s.predicted_peak_bytes, s.recompute_flops)
    # CP-SAT answered every case where store-all does not fit and a schedule does
    assert solved == len(VARIANTS) * sum(
        1 for (g, budget), want in zip(cases, wants)
        if want is not None and plan.store_all(g).predicted_peak_bytes > budget) >= 5 * 15


def test_cp_sat_time_limit_reports_its_proven_gap():
    pytest.importorskip("ortools")
    from bookkit.graphs import gpt_stack
    model = gpt_stack(2, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    budget = int(0.8 * plan.store_all(g).predicted_peak_bytes)
    s = plan.remat(g, budget, time_limit_s=0.5, solver="cp-sat", workers=1)
    assert s.solver == "cp-sat" and not s.optimal
    assert s.method in ("milp", "greedy", "stage-rounded")
    assert 0 < s.gap <= 1 and s.lower_bound_flops <= s.recompute_flops
    assert s.gap == pytest.approx((s.recompute_flops - s.lower_bound_flops)
                                  / s.recompute_flops)
    assert checkmate.simulate(g, s.recompute, s.keep) == (s.predicted_peak_bytes,
                                                          s.recompute_flops)
    assert s.predicted_peak_bytes <= budget
    # started from the greedy plan: never costlier than it
    greedy = [sch for name, sch in checkmate._simple(g, budget) if name == "greedy"]
    assert greedy and s.recompute_flops <= greedy[0].recompute_flops


def _satisfies(P, x):
    """Every row and every variable's bounds of the program hold at ``x``."""
    lhs = np.zeros(len(P.lb))
    np.add.at(lhs, P.rows, np.asarray(P.vals) * x[P.cols])
    return bool(np.all(lhs >= np.asarray(P.lb) - 1e-9) and np.all(lhs <= np.asarray(P.ub) + 1e-9)
                and np.all(x >= 0) and np.all(x <= np.asarray(P.upper)))


def test_the_start_is_a_feasible_assignment_of_the_program():
    # the hint CP-SAT starts from satisfies every row of the program
    from bookkit.graphs import gpt_stack
    model = gpt_stack(1, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    budget = int(0.8 * plan.store_all(g).predicted_peak_bytes)
    P, R, S = checkmate.build_program(g, budget)
    for _, s in checkmate._simple(g, budget):
        x = np.asarray(checkmate._hint_values(g, P, R, S, s.recompute, s.keep), float)
        assert _satisfies(P, x)
        assert float(np.dot(P.cost, x)) == s.recompute_flops
    # a schedule over the budget is not: its memory rows fail
    sa = plan.store_all(g)
    x = np.asarray(checkmate._hint_values(g, P, R, S, sa.recompute, sa.keep), float)
    assert not _satisfies(P, x)


def test_solver_choice_is_checked(monkeypatch):
    g = chain_graph([4, 8, 4, 8], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="solver must be"):
        plan.remat(g, 24, solver="gurobi")
    with pytest.raises(ValueError, match="relax=True"):
        plan.remat(g, 24, relax=True, solver="cp-sat")
    monkeypatch.setitem(sys.modules, "ortools", None)  # as if OR-Tools were absent
    monkeypatch.setitem(sys.modules, "ortools.sat", None)
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)
    with pytest.raises(ImportError, match="needs OR-Tools"):
        plan.remat(g, 24, solver="cp-sat")


def test_cp_sat_without_a_schedule_in_time_returns_a_start_with_the_lp_bound(monkeypatch):
    # as if CP-SAT found nothing in time: the cheapest simple schedule (the LP rounded
    # among them), with the gap to the proven bound (LP relaxation, stage_bound)
    from types import SimpleNamespace
    from bookkit.graphs import gpt_stack
    model = gpt_stack(1, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    budget = int(0.8 * plan.store_all(g).predicted_peak_bytes)
    monkeypatch.setattr(checkmate, "_solve_cp_sat", lambda *a, **k: SimpleNamespace(
        x=None, fun=None, status=1, mip_dual_bound=np.nan, message="CP-SAT: UNKNOWN"))
    s = plan.remat(g, budget, solver="cp-sat")
    lp = plan.remat(g, budget, relax=True)
    best = plan.remat(plan.trace_graph(model.step, model.x), budget)
    assert s.method in ("fallback", "greedy", "lp-rounded", "stage-rounded")
    assert "found no schedule" in s.note
    assert s.recompute_flops <= lp.recompute_flops and s.predicted_peak_bytes <= budget
    assert 0 < s.lower_bound_flops <= best.recompute_flops  # the LP's value, a bound
    # the larger of the LP's value and stage_bound, both proven bounds
    floor = max(lp.lower_bound_flops, checkmate.stage_bound(g, budget))
    assert abs(s.lower_bound_flops - floor) <= 1
    assert not s.optimal and s.gap == pytest.approx(
        (s.recompute_flops - s.lower_bound_flops) / s.recompute_flops)


def test_stage_bound_is_a_bound_and_meets_the_optimum_on_a_gpt_block():
    # never above the exhaustive search's optimum; -1 only where nothing fits
    for g, budget in CASES + _more_random_cases():
        want = brute_force(g, budget)
        got = checkmate.stage_bound(g, budget)
        if want is None:  # infeasible: -1, or a bound with nothing to bound
            continue
        assert 0 <= got <= want, (g.deps, budget)
    # on one GPT block at 80 % of store-all it is the optimum: proven at once
    from bookkit.graphs import gpt_stack
    model = gpt_stack(1, d_model=8, seq_len=8)
    g = plan.trace_graph(model.step, model.x)
    budget = int(0.8 * plan.store_all(g).predicted_peak_bytes)
    s = plan.remat(g, budget)
    assert s.optimal and checkmate.stage_bound(g, budget) == s.recompute_flops
