"""How long `minigrad.plan.rotor` takes to plan long chains, and how that time grows.

Usage:

    python benchmarks/rotor_scaling.py            # the timed cases and the fitted exponent
    python benchmarks/rotor_scaling.py --quick    # up to 400 layers

Two families of chains, each planned at its smallest peak (``rotor(profile)``, exact) and
at larger budgets (exact on the gcd grid while it is small, else with ``slots=``):

* a GPT chain: ``n`` identical blocks whose sizes and FLOPs are profiled from minigrad's
  ``TransformerBlock`` (width 32, 4 heads, batch 4 x 16 tokens), with a mean-square loss;
* a heterogeneous chain of four kinds of layers repeated (different input sizes, saved
  arrays and FLOPs, like linear / relu / layer norm / gelu layers).

Times are CPU seconds of this process (one thread): illustrations, machine-dependent.
The exponent is the least-squares slope of log(time) against log(n) over the
heterogeneous chains at their smallest peak.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import minigrad
from minigrad import nn
from minigrad import plan as P
from minigrad.plan.chain import ChainProfile


def gpt_chain(n: int) -> ChainProfile:
    minigrad.random.manual_seed(0)
    blocks = [nn.TransformerBlock(32, 4) for _ in range(2)]
    x = minigrad.Tensor(np.zeros((4, 16, 32), np.float32), requires_grad=True)
    p = P.profile_chain(blocks, x, loss=lambda y: (y * y).mean())
    return ChainProfile(input_bytes=(p.input_bytes[1],) * n, output_bytes=p.output_bytes,
                        saves_input=(p.saves_input[1],) * n, saves_output=(p.saves_output[1],) * n,
                        own_bytes=(p.own_bytes[1],) * n, cost=(p.cost[1],) * n,
                        loss_saves_input=p.loss_saves_input, loss_own_bytes=p.loss_own_bytes)


KINDS = (  # input bytes, saves its input, saves its output, private bytes, FLOPs
    (4096, True, False, 0, 65536),
    (4096, False, True, 0, 1024),
    (16384, True, False, 8192, 4096),
    (8192, True, False, 2048, 32768),
)


def heterogeneous_chain(n: int) -> ChainProfile:
    ks = [KINDS[i % len(KINDS)] for i in range(n)]
    return ChainProfile(input_bytes=tuple(k[0] for k in ks), output_bytes=4096,
                        saves_input=tuple(k[1] for k in ks), saves_output=tuple(k[2] for k in ks),
                        own_bytes=tuple(k[3] for k in ks), cost=tuple(k[4] for k in ks),
                        loss_saves_input=True)


def timed(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="chains of at most 400 layers")
    args = parser.parse_args()
    rows = []

    def report(name, n, budget, slots, plan, seconds):
        rows.append((name, n, seconds))
        print(f"{name:14s} n={n:5d} budget={budget:9d} B slots={str(slots):5s} "
              f"peak={plan.predicted_peak_activations:9d} B recomputed={plan.recompute_cost:.4g} "
              f"FLOPs  {seconds:7.2f} s", flush=True)

    for n in (25, 50, 100) if args.quick else (25, 50, 100, 200):
        profile = gpt_chain(n)
        plan, s = timed(lambda: P.rotor(profile))
        report("GPT", n, plan.predicted_peak_activations, None, plan, s)
        budget = 3 * plan.predicted_peak_activations
        plan, s = timed(lambda: P.rotor(profile, budget_bytes=budget))
        report("GPT (3x)", n, budget, None, plan, s)
    het = []
    for n in (100, 200, 400) if args.quick else (100, 200, 400, 700, 1000):
        profile = heterogeneous_chain(n)
        plan, s = timed(lambda: P.rotor(profile))
        report("heterogeneous", n, plan.predicted_peak_activations, None, plan, s)
        het.append((n, s))
        budget = 10 * plan.predicted_peak_activations
        plan, s = timed(lambda: P.rotor(profile, budget_bytes=budget, slots=32))
        report("heter. (10x)", n, budget, 32, plan, s)
    ns, ts = np.log([n for n, _ in het]), np.log([max(s, 1e-6) for _, s in het])
    slope = np.polyfit(ns, ts, 1)[0]
    print(f"time ~ n^{slope:.2f} (heterogeneous chains at their smallest peak, "
          f"{het[0][0]} to {het[-1][0]} layers)")


if __name__ == "__main__":
    main()
