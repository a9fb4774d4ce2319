"""minigrad's chain plans on a PyTorch GPT-style stack against torch.compile's
``activation_memory_budget`` (its knapsack partitioner), measured on CPU.

Usage:

    python scripts/torch_plans_vs_compile.py

Six `bookkit.torchmodels.GPTBlock` (width 32, 4 heads, batch 2 x 16 tokens, no dropout)
and a mean-square loss. For torch.compile: AOTAutograd with the min-cut partitioner and
eager graphs (no C++ compiler needed), at budgets 1.0 .. 0.0; FLOPs counted inside the
compiled forward and backward graphs (``FlopCounterMode``), recomputed = backward FLOPs
minus the budget-1.0 backward's. For the chain plans: every segment plan of the six
blocks (`bookkit.torchplan.run_plan`), the cheapest one that holds no more at the end of
forward than torch.compile does at each budget. Bytes: what autograd holds at the end of
the forward pass (`SavedTensorMeter`); the chain model's prediction is checked to equal
it. Prints one row per budget.

Then the graph optimum as a selective-checkpoint policy on the same stack
(`bookkit.torchplan.trace_torch_graph` -> `minigrad.plan.remat` -> `selective_policy`,
each block checkpointed with its policy): at each budget the cheapest policy (over a
sweep of `remat` budgets, 10 s each) that holds no more at the end of forward than
torch.compile, both sides counted the same way: bytes of the storages ATen ops made
that are alive after the forward (`ForwardMemoryMeter` for the policies,
`SavedTensorMeter` for the compiled step, which holds only what it saves; the two
agree on the eager step), recomputed FLOPs under
`bookkit.torchplan.op_flops` (one FLOP per output element for elementwise ops, which
torch's counter leaves at 0). "best": the cheapest policy of `selective_frontier`
(every choice of MUST_SAVE ops in a block, the same in each block, priced by
`selective_policy`'s model of torch's execution) that holds no more than the compiler.

Measured (torch 2.13, CPU; held bytes / recomputed FLOPs under op_flops):

    budget  compile             remat -> policy        best policy
    1.0     403,456 / 0         403,456 / 393,216      403,456 / 6,144
    0.5     208,896 / 705,280   159,744 / 1,485,568    200,704 / 830,208
    0.3     126,976 / 2,020,096  86,016 / 2,665,216    126,976 / 2,009,856
    0.1      45,056 / 3,330,816  none fits              28,672 / 3,582,720
    0.0       4,096 / 5,176,064  none fits             none fits

The compiler wins at 1.0 and 0.5: its partitioner cuts the joint forward-backward
graph and recomputes only what backward reads, while a checkpoint reruns a block's ops
in order up to the last tensor backward needs (the attention's output projection,
which nothing saves, is 65,536 FLOPs per block: 393,216 of the first policy's). It
alone reaches 0.0: it can rebuild the blocks' outputs, which a per-block checkpoint
always keeps (28,672 B at least). The best policy wins at 0.3 (10,240 FLOPs fewer at
the same bytes) and holds less at 0.1, for more FLOPs. The remat column is not an
optimum: on six blocks (132 nodes) the solver returns its greedy start within 10 s
(gap 100 %), and a policy keeps only the schedule's choice of what to save.
"""
from __future__ import annotations

import itertools
import warnings

import torch
import torch._functorch.config as fconfig
import torch.utils.flop_counter as fc
from functorch.compile import min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd

from bookkit.torchmem import ForwardMemoryMeter, SavedTensorMeter
from bookkit.torchmodels import GPTBlock
from bookkit.torchplan import (FlopCount, profile_blocks, run_selective, saved_after_forward,
                               selective_frontier, selective_policy, trace_torch_graph)
from minigrad import plan


def _loss(y):
    return y.square().mean()


def compiled_point(blocks, x, budget, counter=None):
    """(bytes held at the end of forward, recomputed-graph backward FLOPs).

    ``counter``: None (``FlopCounterMode``) or ``"op_flops"`` (`FlopCount`). Bytes:
    the saved storages (`SavedTensorMeter`: the compiled forward saves all it keeps)."""
    torch._dynamo.reset()
    counts = {}

    def counting(tag):
        def compiler(gm, _):
            def run(args):
                if counter == "op_flops":
                    with FlopCount() as c:
                        out = gm(*args)
                    n = c.total
                else:
                    with fc.FlopCounterMode(display=False) as c:
                        out = gm(*args)
                    n = c.get_total_flops()
                counts[tag] = counts.get(tag, 0) + n
                return out
            run._boxed_call = True
            return run
        return compiler

    backend = aot_autograd(fw_compiler=counting("fw"), bw_compiler=counting("bw"),
                           partition_fn=min_cut_rematerialization_partition)
    with fconfig.patch(activation_memory_budget=budget):
        f = torch.compile(lambda x: _loss(blocks(x)), backend=backend)
        f(x).backward()  # compiles
        counts.clear()
        with SavedTensorMeter(params=blocks) as meter:
            out = f(x)
            held = meter.live_bytes
        out.backward()
    return held, counts["bw"]


def _held_after_forward(blocks, x, step):
    """(bytes of ATen-made storages alive after ``loss = step(x)``, less the loss's; loss)."""
    with ForwardMemoryMeter(exclude=[blocks], inputs=[x], allocations=False) as meter:
        loss = step(x)
    return meter.alive_bytes() - loss.untyped_storage().nbytes(), loss


def graph_policies(blocks, x, fractions=(1.0, 0.75, 0.5, 0.35, 0.25, 0.15, 0.05)):
    """[(held bytes measured, recomputed FLOPs measured, policy)] for `remat` budgets
    at ``fractions`` of the way from the lower bound to store-all; measured values
    are checked against the policy's predictions."""
    g = trace_torch_graph(list(blocks), x, loss=_loss)
    top, low = plan.store_all(g).predicted_peak_bytes, plan.lower_bound(g)
    loss = _loss(blocks(x))
    with FlopCount() as c:
        loss.backward()
    plain = c.total
    out = []
    for frac in fractions:
        try:
            s = plan.remat(g, int(low + frac * (top - low)), time_limit_s=10)
        except ValueError as e:     # no schedule found in time (near the lower bound)
            print(f"remat at {frac:.0%} of the way: {type(e).__name__}")
            continue
        p = selective_policy(g, s)
        held, loss = _held_after_forward(
            blocks, x, lambda x, p=p: _loss(run_selective(list(blocks), p, x)))
        with FlopCount() as c:
            loss.backward()
        assert held == p.held_bytes and c.total - plain == p.recompute_flops
        out.append((held, c.total - plain, p))
    return out


def main():
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    n = 6
    blocks = torch.nn.Sequential(*[GPTBlock(32, 4, dropout=0.0) for _ in range(n)])
    x = torch.randn(2, 16, 32, requires_grad=True)
    profile = profile_blocks(list(blocks), x, loss=_loss)
    plans = [plan.explicit(n, [0, *rest]) for k in range(n)
             for rest in itertools.combinations(range(1, n), k)]
    chain = [(saved_after_forward(profile, p), plan.recompute_cost(profile, p), p)
             for p in plans]
    full_bw = None
    print(f"{'budget':>6} {'compile bytes':>13} {'compile FLOPs':>13} "
          f"{'segments bytes':>14} {'segments FLOPs':>14}  starts")
    for budget in (1.0, 0.5, 0.3, 0.1, 0.0):
        held, bw = compiled_point(blocks, x, budget)
        full_bw = bw if full_bw is None else full_bw
        fits = [c for c in chain if c[0] <= held]
        best = min(fits, key=lambda c: (c[1], c[0])) if fits else None
        seg = (f"{best[0]:>14,} {best[1]:>14,}  {list(best[2].starts)}" if best
               else f"{'none fits':>14}")
        print(f"{budget:>6} {held:>13,} {bw - full_bw:>13,} {seg}")
    print()
    print("the graph optimum as a selective policy, both counted with op_flops:")
    policies = graph_policies(blocks, x)
    for held, flops, p in policies:
        s = p.schedule
        status = "optimal" if s.optimal else f"gap {s.gap:.0%}"
        print(f"  remat at {s.budget_bytes or 0:>7,} B ({status}, schedule "
              f"{s.recompute_flops:,} FLOPs): torch holds {held:,} B, recomputes "
              f"{flops:,} FLOPs, peaks at {p.peak_bytes:,} B (predicted)")
    front = selective_frontier(trace_torch_graph(list(blocks), x, loss=_loss))
    print(f"{'budget':>6} {'compile bytes':>13} {'compile FLOPs':>13} "
          f"{'remat bytes':>11} {'remat FLOPs':>11} {'best bytes':>10} {'best FLOPs':>10}")
    full_bw = None
    for budget in (1.0, 0.5, 0.3, 0.1, 0.0):
        held, bw = compiled_point(blocks, x, budget, counter="op_flops")
        full_bw = bw if full_bw is None else full_bw
        fits = [c[:2] for c in policies if c[0] <= held]
        remat = min(fits, key=lambda c: (c[1], c[0])) if fits else None
        within = [(p.held_bytes, p.recompute_flops) for p in front if p.held_bytes <= held]
        best = within[-1] if within else None
        cols = "".join(f" {c[0]:>10,} {c[1]:>11,}" if c else f" {'none fits':>22}"
                       for c in (remat, best))
        print(f"{budget:>6} {held:>13,} {bw - full_bw:>13,}{cols}")

if __name__ == "__main__":
    main()
