"""Record (and re-check) the published rotor solver's answers on random chains.

The published solver (Beaumont et al., rotor's ``algorithms/persistent.py``) is
not part of this repository. To compare with it, put its ``persistent.py`` (and
the module it imports its ``Sequence``/operation classes from) in a folder and
run::

    ROTOR_PUBLISHED=/path/to/folder python tests/rotor_published_record.py          # compare
    ROTOR_PUBLISHED=/path/to/folder python tests/rotor_published_record.py --write  # re-record

Comparing runs ``compute_table`` and ``persistent_rec`` of the published code and
`tests/rotor_published.py` on the same random chains and asserts identical
tables and operation lists; ``--write`` stores the published answers on
``CASES`` chains in ``rotor_published_cases.json`` (the published code's
outputs only), which ``tests/test_rotor.py`` checks without the published code.
``tests/test_rotor.py::test_live_agreement_with_the_published_solver`` runs the
comparison when ``ROTOR_PUBLISHED`` is set.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES_FILE = HERE / "rotor_published_cases.json"
CASES = 60
INF = float("inf")


def random_rotor_params(rng: random.Random, floats: bool):
    """A random chain in rotor's parameters: ``(fw, bw, cw, cbw, ftmp, btmp)``."""
    L = rng.randint(1, 7)
    num = (lambda: round(rng.uniform(0, 5), 3)) if floats else (lambda: rng.randint(0, 5))
    cw = [rng.randint(0, 4) for _ in range(L + 1)]
    return ([num() for _ in range(L)], [num() for _ in range(L + 1)], cw,
            [c + rng.randint(0, 4) for c in cw], [rng.randint(0, 2) for _ in range(L)],
            [rng.randint(0, 2) for _ in range(L + 1)])


_OP_NAMES = {"ForwardEnable": "Fe", "ForwardCheck": "CF", "ForwardNograd": "Fn", "Backward": "B"}


def published_ops(sequence) -> list[tuple]:
    """A published ``Sequence`` as this project's operation tuples."""
    return [("L",) if type(op).__name__ == "Loss" else (_OP_NAMES[type(op).__name__], op.index)
            for op in sequence.list_operations()]


def published_answers(persistent, params, mmax):
    """``(opt at the top for m = 0..mmax, {limit: ops or None})`` from the published code."""
    from rotor_published import RotorChain

    chain = RotorChain(*[tuple(p) for p in params])  # rotor's attribute names: the published code reads it
    opt, what = persistent.compute_table(chain, mmax)
    L = chain.length
    top = [opt[m][0][L] for m in range(mmax + 1)]
    seqs = {}
    for limit in range(mmax + 1):
        try:
            seqs[limit] = published_ops(persistent.persistent_rec(chain, 0, L, limit - params[2][0],
                                                                  (opt, what)))
        except (ValueError, IndexError, KeyError):
            seqs[limit] = None
    return (opt, what), top, seqs


def load_published(folder):
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("persistent")
    finally:
        sys.path.pop(0)


def compare(persistent, n_chains: int, seed: int = 0) -> dict:
    """Run both solvers on ``n_chains`` random chains; assert identical answers."""
    import rotor_published as M

    rng = random.Random(seed)
    counts = {"chains": 0, "tables": 0, "sequences": 0, "infeasible": 0}
    for k in range(n_chains):
        params = random_rotor_params(rng, floats=bool(k % 2))
        chain = M.RotorChain(*[tuple(p) for p in params])
        mmax = rng.randint(0, 45)
        table, _, seqs = published_answers(persistent, params, mmax)
        assert M.persistent_table(chain, mmax) == table, params
        counts["tables"] += 1
        for limit, ops in seqs.items():
            try:
                mine = M.persistent_sequence(chain, limit)
            except ValueError:
                mine = None
            assert mine == ops, (params, limit, ops, mine)
            counts["sequences" if ops is not None else "infeasible"] += 1
        counts["chains"] += 1
    return counts


def record(persistent, seed: int = 2024):
    rng = random.Random(seed)
    cases = []
    for k in range(CASES):
        params = random_rotor_params(rng, floats=bool(k % 2))
        mmax = rng.randint(8, 40)
        _, top, seqs = published_answers(persistent, params, mmax)
        feasible = [lim for lim, ops in seqs.items() if ops is not None]
        # a few limits per chain: the first infeasible and feasible ones, and spread-out others
        keep = sorted({min(seqs), *(feasible[:: max(1, len(feasible) // 6)] if feasible else [])})
        cases.append({
            "chain": params, "mmax": mmax,
            "opt_top": [None if v == INF else v for v in top],
            "sequences": {str(lim): None if seqs[lim] is None else " ".join(
                op[0] if len(op) == 1 else f"{op[0]}{op[1]}" for op in seqs[lim]) for lim in keep},
        })
    CASES_FILE.write_text(json.dumps({"source": "rotor persistent.py (Beaumont et al.), Python "
                                                "compute_table + persistent_rec", "cases": cases},
                                     separators=(",", ":")) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    folder = os.environ.get("ROTOR_PUBLISHED")
    if not folder:
        sys.exit("set ROTOR_PUBLISHED to the folder holding the published persistent.py")
    mod = load_published(folder)
    if "--write" in sys.argv:
        record(mod)
        print(f"wrote {CASES} cases to {CASES_FILE}")
    else:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
        print(compare(mod, n))
