"""Where to checkpoint a chain of layers: plans are plain data, planners are arithmetic.

A plan says which layer inputs a training step keeps and what it recomputes; the
executors in `minigrad.checkpoint` run it. The planners know nothing about arrays or
modules beyond the sizes and costs in a `ChainProfile`, which `profile_chain` measures by
one dry run (the loss included), so their algorithms read like the papers and are tested
on numbers alone. Costs are FLOPs by default.

Modules, by idea:

* `segments` — one-level plans: `uniform` (torch's split), `balanced`, `sqrt_segments`
  (Chen et al.'s rule), `explicit`; `SegmentPlan`.
* `chain` — the model: `ChainProfile`, `predict_peak`, `recompute_cost`.
* `profile` — `profile_chain`: a profile measured from real layers; `as_profile`, the
  planners' one adapter (layers or a `ChainProfile`).
* `optimal` — the optimal segment plan (contiguous segments, every one checkpointed but
  the last): `optimal_segments` (fast; ``tests/plan_references.py`` restates its
  recurrence), `min_peak_for_each_last_start`.
* `binomial` — Revolve's binomial nested schedule (Griewank–Walther): `revolve`.
* `nested` — the optimal nested schedule of a heterogeneous chain
  (Beaumont et al.'s rotor, under the byte ledger): `rotor`, `NestedSchedule`, and
  `optimal_one_level`, rotor restricted to depth 1 (segments checkpointed or layers taped
  and kept), never worse than `optimal_segments`
  (``tests/rotor_published.py`` restates the published solver's model for comparison).
* `graph` — a step as a DAG: `trace_graph` (one dry run), `GraphProfile`, `chain_graph`.
* `checkmate` — optimal rematerialization of the DAG (Checkmate's integer program,
  solved with SciPy's HiGHS, imported only when it runs): `remat`, `GraphSchedule`,
  `lower_bound`, `store_all`, `keeping`; `minigrad.remat.run` executes a schedule.

Example:
    >>> import numpy as np
    >>> import minigrad
    >>> from minigrad import Tensor, nn, plan
    >>> from minigrad.checkpoint import checkpoint_sequential
    >>> layers = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(6)]
    >>> x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    >>> p = plan.optimal_segments(layers, x, budget_bytes=2048)
    >>> checkpoint_sequential(layers, p, x).sum().backward()
"""
from minigrad.plan.chain import ChainProfile, predict_peak, recompute_cost
from minigrad.plan.optimal import min_peak_for_each_last_start, optimal_segments
from minigrad.plan.profile import profile_chain
from minigrad.plan.binomial import (RevolvePlan, beta, binomial_split, repetition_number, revolve,
                                   revolve_actions, untaped_forward_steps)
from minigrad.plan.segments import SegmentPlan, balanced, explicit, sqrt_segments, uniform
from minigrad.plan.nested import (Checkpointed, NestedSchedule, Taped, optimal_one_level, rotor,
                                 rotor_frontier)
from minigrad.plan.graph import GraphProfile, chain_graph, trace_graph
from minigrad.plan.checkmate import GraphSchedule, keeping, lower_bound, remat, store_all

__all__ = [
    "SegmentPlan", "uniform", "balanced", "sqrt_segments", "explicit",
    "ChainProfile", "predict_peak", "recompute_cost", "profile_chain",
    "optimal_segments",
    "min_peak_for_each_last_start", "optimal_one_level",
    "RevolvePlan", "revolve", "revolve_actions", "beta", "repetition_number",
    "untaped_forward_steps", "binomial_split",
    "rotor", "rotor_frontier", "NestedSchedule", "Taped", "Checkpointed",
    "GraphProfile", "trace_graph", "chain_graph", "GraphSchedule", "remat", "lower_bound",
    "store_all", "keeping",
]
