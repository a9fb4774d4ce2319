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
"""
from __future__ import annotations

import itertools
import warnings

import torch
import torch._functorch.config as fconfig
import torch.utils.flop_counter as fc
from functorch.compile import min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd

from bookkit.torchmem import SavedTensorMeter
from bookkit.torchmodels import GPTBlock
from bookkit.torchplan import profile_blocks, saved_after_forward
from minigrad import plan


def _loss(y):
    return y.square().mean()


def compiled_point(blocks, x, budget):
    """(bytes held at the end of forward, recomputed-graph backward FLOPs)."""
    torch._dynamo.reset()
    counts = {}

    def counting(tag):
        def compiler(gm, _):
            def run(args):
                with fc.FlopCounterMode(display=False) as c:
                    out = gm(*args)
                counts[tag] = counts.get(tag, 0) + c.get_total_flops()
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


if __name__ == "__main__":
    main()
