"""The assignments' tests judged themselves: the reference passes every test (each answer it
records is the expected one, and the public tests pass as a notebook runs them), every wrong
answer in ``tests/assignment_mutants/<name>.py`` loses at least the points of the idea it
gets wrong, and every other correct answer there loses nothing.

Each assignment runs in a process of its own (``scripts/probe_assignment.py NAME
--mutants``, the maintainer's command): some tests walk the heap, which is slow in a
process as full as pytest's."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from bookpaths import ROOT, load_module

probe = load_module(ROOT / "scripts" / "probe_assignment.py", "probe_assignment")
NAMES = sorted(p.parent.name for p in (ROOT / "assignments").glob("*/*.ipynb") if p.stem == p.parent.name)


@pytest.mark.parametrize("name", NAMES)
def test_five_wrong_answers_per_question_and_a_correct_one(name):
    parts = probe.load_parts(name)
    mutants = probe.load_mutants(name)
    wrong = Counter(m["question"] for m in mutants if not m.get("correct"))
    few = {q: wrong[q] for q in parts["order"] if wrong[q] < 5}
    assert not few, f"{name}: fewer than five wrong answers for {few}"
    for m in mutants:
        assert m["question"] in parts["order"] and m.get("idea"), m.get("name")
        assert m.get("correct") or m["points"] > 0, f"{name} {m['name']}: a wrong answer must lose points"


@pytest.mark.slow  # every mutant graded: 1-10 s per assignment (make test runs it)
@pytest.mark.parametrize("name", NAMES)
def test_the_reference_passes_and_every_wrong_answer_loses_its_points(name):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "probe_assignment.py"), name, "--mutants"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"{name}:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    assert "all pass" in proc.stdout.splitlines()[0], proc.stdout[:2000]


def test_a_wrong_answer_that_loses_too_little_is_reported():
    """The check itself: an answer filed as wrong that is in fact right (it loses nothing)
    is reported as missed, and so is a "correct" one that loses points."""
    parts = probe.load_parts("a3_checkpoint")
    want = probe.reference_records(parts, 424242, questions=["q3"])
    right = {"question": "q3", "name": "not_wrong", "points": 1,
             "source": "def predicted_peak(n, starts, act_bytes):\n"
                       "    b = list(starts) + [n]\n"
                       "    return act_bytes * max([len(starts) - 1 + n - starts[-1] + 1]\n"
                       "                           + [j + 1 + b[j + 1] - b[j] for j in range(len(starts) - 1)])\n"}
    lost, _ = probe.grade_mutant(parts, right, want, 424242)
    assert lost == 0 and not probe.caught(right, lost)
    wrong = dict(right, name="said_correct", correct=True,
                 source="def predicted_peak(n, starts, act_bytes):\n    return 0\n")
    lost, _ = probe.grade_mutant(parts, wrong, want, 424242)
    assert lost > 0 and not probe.caught(wrong, lost)
    assert probe.caught(dict(wrong, correct=False, points=lost), lost)
