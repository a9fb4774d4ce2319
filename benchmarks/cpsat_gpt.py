"""Proving Checkmate's optimum on the GPT step: CP-SAT (and HiGHS) on
``bookkit.graphs.gpt_stack(n, d_model=8, seq_len=8)`` at a fraction of
store-all's peak, several runs each; prints proven or not, time, gap, and the
machine's load (``os.getloadavg``) beside each run. Not a test: times depend on
the machine.

    .venv/bin/python benchmarks/cpsat_gpt.py --blocks 4 --fraction 0.8 --runs 5
    .venv/bin/python benchmarks/cpsat_gpt.py --blocks 8 --runs 1
"""
import argparse
import os
import time

from bookkit.graphs import gpt_stack
from minigrad import plan
from minigrad.plan import checkmate


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--fraction", type=float, default=0.8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--solver", default="cp-sat")
    ap.add_argument("--improvements", default=",".join(checkmate.IMPROVEMENTS),
                    help="comma-separated; '' for the published program")
    a = ap.parse_args()
    imp = tuple(x for x in a.improvements.split(",") if x)
    model = gpt_stack(a.blocks, d_model=8, seq_len=8)
    print(f"GPT {a.blocks} blocks, {a.fraction:.0%} of store-all, {a.solver}, "
          f"{a.workers} workers, improvements {imp}")
    for run in range(a.runs):
        g = plan.trace_graph(model.step, model.x)  # fresh: no earlier plan as start
        budget = int(a.fraction * plan.store_all(g).predicted_peak_bytes)
        t0 = time.perf_counter()
        s = plan.remat(g, budget, time_limit_s=a.time_limit, solver=a.solver,
                       workers=a.workers, improvements=imp)
        dt = time.perf_counter() - t0
        load = os.getloadavg()[0]
        print(f"run {run}: {g.n_nodes} nodes, budget {budget:,} B: "
              f"{'proven' if s.optimal else 'not proven'} in {dt:.1f} s, "
              f"cost {s.recompute_flops:,} FLOPs, bound {s.lower_bound_flops:,.0f}, "
              f"gap {s.gap:.1%}, {s.method} {s.solver}, load {load:.2f}", flush=True)


if __name__ == "__main__":
    main()
