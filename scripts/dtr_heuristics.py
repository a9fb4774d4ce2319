"""DTR's score against the naive per-array score: recomputed FLOPs under byte budgets.

Usage:

    python scripts/dtr_heuristics.py

For an MLP chain (8 x Linear-GELU-Dropout, width 32) and two GPTs (2 and 4 blocks,
width 32, 4 heads, 4 x 16 tokens, dropout 0.1), one training step runs plain and then
under ``minigrad.dtr.budget`` at 60, 40, 30 and 25 % of the plain step's peak of saved
activations, with each of `minigrad.dtr.HEURISTICS`. Printed: the ledger's recomputed
FLOPs (``m.flops["recompute"]``) as a multiple of the forward FLOPs, and the number of
rebuilds; every run keeps ``m.peak["activations"]`` within its budget with gradients
bit-identical to the plain step (checked here too). FLOP counts are exact, the same on
every machine.
"""
from __future__ import annotations

import numpy as np

import minigrad
import minigrad.ops as F
from minigrad import Tensor, dtr, memory, nn


def mlp():
    minigrad.random.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(32, 32), nn.GELU(), nn.Dropout(0.1)]
    model = nn.Sequential(*layers)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((16, 32)).astype(np.float32))
    y = Tensor(rng.standard_normal((16, 32)).astype(np.float32))
    return model, lambda: F.mse_loss(model(x), y)


def gpt(n_layers):
    minigrad.random.manual_seed(0)
    model = nn.GPT(nn.GPTConfig(vocab_size=64, d_model=32, n_heads=4, n_layers=n_layers,
                                seq_len=16, dropout=0.1))
    rng = np.random.default_rng(0)
    idx, tgt = Tensor(rng.integers(0, 64, (4, 16))), Tensor(rng.integers(0, 64, (4, 16)))
    return model, lambda: F.cross_entropy(model(idx).reshape(-1, 64), tgt.reshape(-1))


def step(model, loss_fn, budget_bytes=None, heuristic="dtr"):
    for p in model.parameters():
        p.grad = None
    minigrad.random.manual_seed(1)
    with memory.track(record_timeline=False) as m:
        if budget_bytes is None:
            pool = None
            loss_fn().backward()
        else:
            with dtr.budget(budget_bytes, heuristic=heuristic) as pool:
                loss_fn().backward()
    return m, pool, [p.grad.copy() for p in model.parameters()]


def main():
    for name, make in (("MLP chain", mlp), ("GPT, 2 blocks", lambda: gpt(2)),
                       ("GPT, 4 blocks", lambda: gpt(4))):
        model, loss_fn = make()
        plain, _, grads = step(model, loss_fn)
        fwd = plain.flops["forward"]
        print(f"{name}: plain peak {plain.peak['activations']} B, forward {fwd} FLOPs")
        for fraction in (0.6, 0.4, 0.3, 0.25):
            budget = int(plain.peak["activations"] * fraction)
            cells = []
            for heuristic in dtr.HEURISTICS:
                try:
                    m, pool, g = step(model, loss_fn, budget, heuristic)
                except dtr.BudgetError:
                    cells.append(f"{heuristic} infeasible")
                    continue
                assert m.peak["activations"] <= budget
                assert all(np.array_equal(a, b) for a, b in zip(g, grads))
                cells.append(f"{heuristic} {m.flops['recompute'] / fwd:.2f}x ({pool.rebuilds})")
            print(f"  {round(100 * fraction):3d} % = {budget:7d} B: " + ", ".join(cells))


if __name__ == "__main__":
    main()
