"""Revolve, the one-level optimum and the nested optimum at Revolve's own peak.

Revolve (Griewank & Walther) is optimal for equal layers in its own model, where
memory is counted in slots and every step is run taped and reversed at once. Under
minigrad's byte ledger the comparison changes: for every chain of ``n`` equal layers
and every slot count ``s = 1 .. n-1`` this script runs Revolve's schedule under the
ledger, takes its measured peak of saved activations as the budget, plans the
one-level optimum (`minigrad.plan.optimal_segments`, when one fits) and the nested
optimum (`minigrad.plan.rotor`) for it, runs both with ``checkpoint_sequential``, and
counts the recomputed layer calls. Every number printed is measured (and asserted equal to the planners'
predictions).

    .venv/bin/python benchmarks/revolve_vs_rotor.py            # n = 2 .. 20, Linear layers
    .venv/bin/python benchmarks/revolve_vs_rotor.py --n-max 12 --layer mlp --table
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import minigrad  # noqa: E402
from minigrad import memory, nn  # noqa: E402
from minigrad import plan as P  # noqa: E402
from minigrad.checkpoint import checkpoint_sequential  # noqa: E402
from minigrad.plan.nested import from_revolve, schedule_peak  # noqa: E402


def equal_chain(n: int, layer: str, width: int = 8, batch: int = 4):
    """``n`` equal layers: ``Linear(width, width)`` (saves its input) or an MLP block
    ``Linear -> Tanh -> Linear`` (saves its input and the hidden activation)."""
    minigrad.random.manual_seed(n)
    if layer == "linear":
        layers = [nn.Linear(width, width) for _ in range(n)]
    elif layer == "mlp":
        layers = [nn.Sequential(nn.Linear(width, 2 * width), nn.Tanh(), nn.Linear(2 * width, width))
                  for _ in range(n)]
    else:
        raise ValueError(f"layer must be 'linear' or 'mlp', got {layer!r}")
    return layers, minigrad.Tensor(np.ones((batch, width), np.float32), requires_grad=True)


def run(layers, x, plan):
    """Measured (peak saved-activation bytes, recomputed layer calls) of one step."""
    calls = [0]

    def counted(layer):
        def f(h):
            calls[0] += 1
            return layer(h)
        return f
    wrapped = [counted(layer) for layer in layers]
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential(wrapped, plan, x)
        y.backward(np.ones(y.shape, np.float32))
    return m.peak["activations"], calls[0] - len(layers)


def compare(n_max: int, layer: str):
    rows = []
    for n in range(2, n_max + 1):
        layers, x = equal_chain(n, layer)
        profile = P.profile_chain(layers, x, cost=[1] * n)  # work counted in layer calls
        for s in range(1, n):
            rev = from_revolve(P.revolve(n, s))
            peak, rev_calls = run(layers, x, rev)
            assert peak == schedule_peak(profile, rev)
            try:
                one = P.optimal_segments(profile, budget_bytes=peak)
            except ValueError:
                one_calls = None  # no one-level plan fits Revolve's peak
            else:
                one_peak, one_calls = run(layers, x, one)
                assert one_peak == one.predicted_peak_activations <= peak
                assert one_calls == one.recompute_cost
            nested = P.rotor(profile, budget_bytes=peak)
            rot_peak, rot_calls = run(layers, x, nested)
            assert rot_peak == nested.predicted_peak_activations <= peak
            assert rot_calls == nested.recompute_cost
            rows.append((n, s, peak, rev_calls, one_calls, rot_calls))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-max", type=int, default=20)
    ap.add_argument("--layer", choices=("linear", "mlp"), default="linear")
    ap.add_argument("--table", action="store_true", help="print every case")
    args = ap.parse_args()
    rows = compare(args.n_max, args.layer)
    if args.table:
        print(" n  s  peak(B)  Revolve  one-level  rotor   (recomputed layer calls)")
        for n, s, peak, rev, one, rot in rows:
            print(f"{n:2d} {s:2d} {peak:8d} {rev:8d} {'-' if one is None else one:>10} {rot:6d}")
    fits = [r for r in rows if r[4] is not None]
    print(f"{args.layer} layers, n = 2 .. {args.n_max}, slots 1 .. n-1: {len(rows)} cases")
    print(f"  a one-level plan fits Revolve's measured peak in {len(fits)}; it recomputes less than "
          f"Revolve in {sum(r[4] < r[3] for r in fits)}, as much in {sum(r[4] == r[3] for r in fits)}, "
          f"more in {sum(r[4] > r[3] for r in fits)}")
    print(f"  the nested optimum recomputes less than Revolve in {sum(r[5] < r[3] for r in rows)} of "
          f"{len(rows)}, less than the one-level plan in {sum(r[5] < r[4] for r in fits)} of {len(fits)} "
          f"(never more: {all(r[5] <= r[4] for r in fits)})")


if __name__ == "__main__":
    main()
