"""Run an assignment's tests in this process: the reference against itself, then wrong answers.

    python scripts/probe_assignment.py NAME [--seed N] [--mutants]

The reference solution (the master's solution cells) must pass every test with every answer
it records equal to the expected value its test computes. With ``--mutants`` every wrong
answer of ``tests/assignment_mutants/NAME.py`` is graded against the reference's records and
must lose at least the points it names. This is the development loop for the tests; the
grader runs each test in a sandboxed process of its own (``make grade``).
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "assignments"), str(ROOT)]

from grading import probes

MUTANTS = ROOT / "tests" / "assignment_mutants"


def load_parts(name: str) -> dict:
    return probes.master_parts(json.loads((ROOT / "assignments" / name / f"{name}.ipynb").read_text()))


def reference_records(parts, seed, questions=None) -> dict:
    """``{question: {test: record}}`` of the reference run against itself (every question,
    or those of ``questions``)."""
    given = probes.given_namespace(parts)
    out = {}
    for q in parts["order"] if questions is None else questions:
        ref = dict(given)
        probes.exec_cells([parts["solutions"][p] for p in parts["order"]], ref, "reference")
        out[q] = probes.probe_question(parts, q, ref, seed, given)
    return out


def grade_mutant(parts, mutant: dict, want: dict, seed) -> tuple[float, dict]:
    """Points the mutant's question loses (the reference everywhere else, ``mutant["source"]``
    run after the question's reference code)."""
    given = probes.given_namespace(parts)
    ns = dict(given)
    probes.exec_cells([parts["solutions"][q] for q in parts["order"]], ns, "reference")
    exec(compile(mutant["source"], f"<mutant {mutant['name']}>", "exec"), ns)
    got = probes.probe_question(parts, mutant["question"], ns, seed, given)
    return probes.points_lost(parts, mutant["question"], got, want[mutant["question"]])


def public_tests_in_a_notebook(parts, seed) -> list[str]:
    """The public tests run as ``grader.check`` runs them in the reference notebook (not
    recording: ``assert_answer`` asserts); returns their failures."""
    given = probes.given_namespace(parts)
    problems = []
    for q in parts["order"]:
        ns = dict(given)
        probes.exec_cells([parts["solutions"][p] for p in parts["order"]], ns, "reference")
        tests = probes.load_tests(parts["questions"][q]["tests"], q)
        for case in probes.test_cases(parts["questions"][q]["tests"]):
            if case["hidden"]:
                continue
            fn = tests[case["test"]]
            import inspect
            try:
                fn(*[ns[p] for p in inspect.signature(fn).parameters if p != "seed"])
            except BaseException as e:  # noqa: BLE001
                problems.append(f"{q} {case['test']}: {type(e).__name__}: {e}")
    return problems


def caught(mutant: dict, lost: float) -> bool:
    """Whether the grader judged ``mutant`` as it must: a correct answer loses nothing, a
    wrong one at least the (positive) points of its idea."""
    return lost == 0 if mutant.get("correct") else lost >= mutant["points"] > 0


def load_mutants(name: str) -> list[dict]:
    path = MUTANTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"mutants_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MUTANTS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--seed", type=int, default=424242)
    ap.add_argument("--mutants", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="say why each mutant lost its points")
    args = ap.parse_args()
    parts = load_parts(args.name)
    t0 = time.perf_counter()
    want = reference_records(parts, args.seed)
    bad = [f"{q} {p}" for q, recs in want.items() for p in probes.reference_problems(recs)]
    n = sum(len(r) for r in want.values())
    print(f"{args.name}: reference, {n} tests, {time.perf_counter() - t0:.1f} s: "
          + ("all pass" if not bad else f"{len(bad)} problems"))
    for b in bad:
        print("  ", b)
    failed = bool(bad)
    for problem in public_tests_in_a_notebook(parts, args.seed):
        print("   public test, as a notebook runs it:", problem)
        failed = True
    if args.mutants:
        for m in load_mutants(args.name):
            t0 = time.perf_counter()
            lost, why = grade_mutant(parts, m, copy.deepcopy(want), args.seed)
            ok = caught(m, lost)
            failed |= not ok
            print(f"  {'ok  ' if ok else 'MISS'} {m['question']} {m['name']}: lost {lost:g} "
                  f"(at least {m['points']:g}), {time.perf_counter() - t0:.1f} s")
            if not ok or args.verbose:
                for t, r in why.items():
                    print(f"       {t}: {r[:200]}")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
