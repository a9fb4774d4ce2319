"""The assignments' tests judged themselves: the reference passes every test (each answer it
records is the expected one), every wrong answer in ``tests/assignment_mutants/<name>.py``
loses at least the points of the idea it gets wrong, and every other correct answer there
loses nothing. In process, the way ``scripts/probe_assignment.py NAME --mutants`` runs them
(the grader runs the same probes, each in a sandboxed process of its own)."""
from __future__ import annotations

import copy
from collections import Counter

import pytest

from bookpaths import ROOT, load_module

probe = load_module(ROOT / "scripts" / "probe_assignment.py", "probe_assignment")
NAMES = sorted(p.parent.name for p in (ROOT / "assignments").glob("*/*.ipynb") if p.stem == p.parent.name)
SEED = 424242


@pytest.fixture(scope="module", params=NAMES)
def assignment(request):
    name = request.param
    parts = probe.load_parts(name)
    return name, parts, probe.reference_records(parts, SEED)


def test_the_reference_passes_its_own_tests(assignment):
    name, parts, want = assignment
    problems = [p for recs in want.values() for p in probe.probes.reference_problems(recs)]
    assert not problems, f"{name}: {problems}"
    assert not probe.public_tests_in_a_notebook(parts, SEED), name


def test_five_wrong_answers_per_question_each_lose_their_points(assignment):
    name, parts, want = assignment
    mutants = probe.load_mutants(name)
    wrong = Counter(m["question"] for m in mutants if not m.get("correct"))
    few = {q: wrong[q] for q in parts["order"] if wrong[q] < 5}
    assert not few, f"{name}: fewer than five wrong answers for {few}"
    missed = []
    for m in mutants:
        lost, why = probe.grade_mutant(parts, m, copy.deepcopy(want), SEED)
        if m.get("correct") and lost:
            missed.append(f"{m['question']} {m['name']} (correct) lost {lost:g}: {why}")
        elif not m.get("correct") and lost < m["points"]:
            missed.append(f"{m['question']} {m['name']} lost {lost:g} of the {m['points']:g} it must")
    assert not missed, f"{name}:\n" + "\n".join(missed)
