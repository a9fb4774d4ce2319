"""rotor on long heterogeneous chains: time, schedule cost, lower bound, gap.

Budgets: the smallest peak (no budget), 1.5 and 3 times it, and fractions of
the store-all peak (every layer taped, the loss too). The time exponent is
fitted from the first to the last n (CPU seconds, one process).
Chains: random 4-byte-multiple sizes (no large common factor), integer costs.
Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/rotor_bound.py [n ...]
"""
import math
import sys
import time

sys.path.insert(0, "tests")

from test_plan_rotor_bound import _store_all, long_chain

from minigrad import plan as P
from minigrad.plan.nested import _min_peak


def main(ns=(250, 500, 1000), fractions=(None, 1.5, 3, 0.3, 0.6)):
    """``fractions``: None (the smallest peak), a number above 1 (that many
    times the smallest peak) or at most 1 (that fraction of store-all)."""
    rows = []
    for n in ns:
        profile = long_chain(n)
        whole, smallest = _store_all(profile), _min_peak(profile)
        for f in fractions:
            budget = None if f is None else max(smallest, int(
                f * (smallest if f > 1 else whole)))
            t = time.process_time()
            s = P.rotor(profile, budget_bytes=budget)
            dt = time.process_time() - t
            lb = s.recompute_cost if s.lower_bound_cost is None \
                else s.lower_bound_cost
            gap = (s.recompute_cost - lb) / s.recompute_cost \
                if s.recompute_cost else 0.0
            rows.append((n, f, dt))
            assert budget is None or s.predicted_peak_activations <= budget
            what = "smallest peak" if f is None else f"{f:g}x smallest" \
                if f > 1 else f"{f:.0%} of store-all"
            print(f"n={n:5d} budget={what:>14}  cpu={dt:6.1f} s  "
                  f"cost={s.recompute_cost:.4g}  bound={lb:.4g}  "
                  f"gap={gap:.1%}", flush=True)
    for f in fractions:
        pts = [(math.log(n), math.log(dt)) for n, ff, dt in rows if ff == f]
        if len(pts) > 1:
            (x0, y0), (x1, y1) = pts[0], pts[-1]
            what = "smallest peak" if f is None else f"{f:g}x" \
                if f > 1 else f"{f:.0%}"
            print(f"time exponent at {what}: {(y1 - y0) / (x1 - x0):.2f}")


if __name__ == "__main__":
    main(tuple(int(v) for v in sys.argv[1:]) or (250, 500, 1000))
