"""The course assignments (assignments/, scripts/assignments.py, the book's Assignments part).

For every assignment: `otter assign` builds it; the solution scores full marks in the
sandbox; the notebook as handed out scores less, with a readable message for each failing
test; a subtly wrong answer loses the points of its own question only; a submission that
patches otter, minigrad or the notebook's helpers scores 0 with the reason; a library
shortcut is refused. Assignment 3's demonstration class takes every path of `make grade`:
correct, partial, unanswered, hanging (only the tests it hangs are lost), malformed, not
a notebook, crashing, another assignment's, subtly wrong, tampering, sabotaging, and the
victim graded after the saboteur (full marks, its file untouched, and no hidden test text
ever readable by submission code). The Gradescope zip grades the solution at full marks
from a clean virtual environment (tests/test_gradescope_path.py). No solution code and no hidden test reaches students;
the book shows the current student version.

The grader runs from the grading environment, .venv-grade (see assignments/requirements.txt);
these tests run it as a subprocess. `make test` creates it; so does `make assignments`.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from bookpaths import HTML, ROOT, config, load_module, toc_files

# `make test` runs each test file on one worker (--dist loadfile): the module fixtures
# below build and grade every assignment once, not once per worker.
pytestmark = pytest.mark.book

GRADE_PY = ROOT / ".venv-grade" / "bin" / "python"
SCRIPT = ROOT / "scripts" / "assignments.py"
MASTERS = ROOT / "assignments"
BOOK = ROOT / "book" / "assignments"
NAMES = sorted(p.parent.name for p in MASTERS.glob("*/*.ipynb") if p.stem == p.parent.name)
DEMO = "a3_checkpoint"       # the assignment whose demonstration class is graded in full
GRADESCOPE_NAME = "a1_backward"  # the assignment graded through the Gradescope zip
TEST_TIMEOUT_S = 5           # per test in these runs (the bomb's and dave's limit)
HANG_TIMEOUT_S = 1           # per test for the notebook whose every graded name hangs
SEED = 20261201

# scripts/assignments.py, loaded by path.
sys.path.insert(0, str(MASTERS))
script = load_module(SCRIPT, "assignments_script")
GRADESCOPE_PROCESS_LIMIT = load_module(MASTERS / "grading" / "gradescope.py", "grading_gradescope").PROCESS_LIMIT


def grade_env(*args, timeout=1200) -> subprocess.CompletedProcess:
    if not GRADE_PY.is_file():
        pytest.fail("the grading environment .venv-grade is missing: run `make assignments` "
                    "(`make test` creates it too)")
    proc = subprocess.run([str(GRADE_PY), str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def read_scores(folder: Path) -> dict[str, dict]:
    with open(folder / "scores.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == script.SCORES_COLUMNS, f"scores.csv columns: {list(rows[0]) if rows else None}"
    return {r["submission"]: r for r in rows}


def results(folder: Path, submission: str) -> list[dict]:
    return json.loads((folder / "results" / f"{submission}.json").read_text())["detail"]["tests"]


def hidden_test_names(built: Path, name: str) -> set[str]:
    payload = json.loads((built / name / "autograder" / "grader" / "payload.json").read_text())
    return {c["test"] for spec in payload["questions"].values()
            for c in script.driver.test_cases(spec["tests"]) if c["hidden"]}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built")
    # the graded runs below check the solutions (build would grade each one once more)
    grade_env("build", "--out", out, "--no-run-tests", "--jobs", 2, "--seed", SEED)
    return out


# Grade runs at once. A run grades two submissions at a time (and the reference beside
# them) and is CPU-bound: a second run beside it, with the other test worker's browser,
# let a correct notebook's memory test (ten heap walks) and the bomb reach the 5 s limit
# of the attack runs. So one run at a time, in the order `gradings` gives.
GRADE_RUNS = 1


def grade_runs(runs: list[tuple]) -> None:
    """``grade_env(*args)`` for each of ``runs``, GRADE_RUNS at a time, in the order given
    (the longest first, so that the last ones to finish are short)."""
    with ThreadPoolExecutor(GRADE_RUNS) as pool:
        for done in [pool.submit(grade_env, *args) for args in runs]:
            done.result()


@pytest.fixture(scope="module")
def gradings(built, tmp_path_factory) -> dict:
    """Every class this file grades, graded in one pool of runs: assignment 3's
    demonstration class; every assignment's attack class (scripts/assignments.py
    ATTACK_CLASS), which for every other assignment also holds its solution, a subtly
    wrong answer (where the demonstration class has one) and a tampering submission (one
    run, one reference: the notebook as handed out is the attack class's blank); the
    library shortcuts of `SHORTCUTS` are graded with their assignment's attack class."""
    runs = []
    demo = tmp_path_factory.mktemp("class")
    grade_env("demo-class", DEMO, demo, "--out", built)
    victim = hashlib.sha256((demo / "victor.ipynb").read_bytes()).hexdigest()
    runs.append(("grade", DEMO, demo, "--out", built, "--timeout", TEST_TIMEOUT_S, "--jobs", 2))
    attacked = {name: attack_class(name, built, tmp_path_factory) for name in NAMES}
    # the hanging notebook alone, at a short limit: each of its tests spins a core until
    # the limit (what is checked is that it costs only its limits, whatever they are)
    hanging = tmp_path_factory.mktemp("hanging")
    shutil.move(attacked[DEMO] / "hang.ipynb", hanging / "hang.ipynb")
    runs.append(("grade", DEMO, hanging, "--out", built, "--timeout", HANG_TIMEOUT_S, "--jobs", 2))
    shortcuts = {kind: add_shortcut(kind, built, attacked[SHORTCUTS[kind][0]]) for kind in SHORTCUTS}
    graded_all = {}
    for name in NAMES:
        if name == DEMO:  # its attack class holds the hanging notebook: the short limit
            runs.append(("grade", name, attacked[name], "--out", built, "--timeout", TEST_TIMEOUT_S,
                         "--jobs", 2))
            continue
        demo_folder = tmp_path_factory.mktemp(f"{name}-demo")
        grade_env("demo-class", name, demo_folder, "--out", built)
        for kept, as_name in [("alice.ipynb", "solution.ipynb"), ("ivan.ipynb", "subtle.ipynb"),
                              ("mallory.ipynb", "tampering.ipynb")]:
            if (demo_folder / kept).exists():
                shutil.copy(demo_folder / kept, attacked[name] / as_name)
        graded_all[name] = attacked[name]
        # no notebook of this class hangs: a limit no correct test meets on a busy machine
        runs.append(("grade", name, attacked[name], "--out", built, "--timeout", 60, "--jobs", 2))
    # the slowest first: torch's assignment, then the hanging notebook's
    runs.sort(key=lambda args: (args[1] != "a5_selective", args[2] != attacked[DEMO]))
    grade_runs(runs)
    assert hashlib.sha256((demo / "victor.ipynb").read_bytes()).hexdigest() == victim, \
        "the victim's notebook changed while the class was graded"
    return {"demo": demo, "graded_all": graded_all, "attacked": attacked, "shortcuts": shortcuts,
            "hanging": hanging}


@pytest.fixture(scope="module")
def demo(gradings) -> Path:
    """Assignment 3's demonstration class, graded (``make grade``'s command)."""
    return gradings["demo"]


@pytest.fixture(scope="module")
def graded_all(gradings) -> dict[str, Path]:
    """For every other assignment: the solution, the notebook as handed out, a subtly wrong
    answer (where the demonstration class has one) and a tampering submission, graded (in
    its attack class's folder)."""
    return gradings["graded_all"]


def graded(name, demo, graded_all) -> tuple[Path, dict[str, str]]:
    """(folder, role -> file name) of a graded assignment."""
    if name == DEMO:
        return demo, {"solution": "alice.ipynb", "student": "carol.ipynb", "subtle": "ivan.ipynb",
                      "tampering": "mallory.ipynb"}
    folder = graded_all[name]
    roles = {role: f"{role}.ipynb" for role in ("solution", "subtle", "tampering")
             if (folder / f"{role}.ipynb").exists()}
    return folder, dict(roles, student="blank.ipynb")


# The solution followed by a cell that ends the process, crashes it or fills the disk:
# graded for the demonstration assignment, and the segfault for the torch one too (each a
# full solution run; the runner's restart, which loads torch again there, and the quota do
# not depend on the assignment).
SURVIVORS = ("crash", "segfault", "disk")
SURVIVOR_CHECKS = {DEMO: SURVIVORS, "a5_selective": ("segfault",)}
# The namespace watch (rawpatch) does not depend on the assignment either: the plain one and
# the one that imports torch. Nor do the process limit and the result files a bomb and a
# results.json writer meet (the sandbox's and the kernel's): graded on the demonstration
# assignment, and on a1 through Gradescope's path (a bomb forking from a process that has
# loaded torch spends most of a 5 s limit on its forks when the machine is busy).
GUARD_CHECKS = (DEMO, "a5_selective")
SANDBOX_CHECKS = ("bomb", "results")
# The attacks on the runner and its guard (forged messages, NumPy or minigrad patched, the
# stack walked, floods, observers and planted objects) meet the same code in every
# assignment: graded on GUARD_CHECKS. Every assignment's class keeps what depends on its
# own answers and tests: the blank notebook, always-equal answers, the leaking notebook
# (its hidden tests), and its solution, subtly wrong and tampering submissions.
RUNNER_ATTACKS = ("forge", "stack", "numpy", "restore", "flood", "spy", "planted", "selfpatch",
                  "rawpatch_late")
# Of those, the torch assignment keeps the ones its guard meets with torch's modules in the
# fingerprint (patches put back, planted objects); forged messages, stack walks, floods,
# NumPy's internals and minigrad's observers meet no code of torch's: graded on a3 alone.
TORCH_GUARD_ATTACKS = ("planted", "selfpatch", "rawpatch_late")


# Each a handout with attack cells, named by its assignment's prefix (tests/attacks_found/).
FOUND_ATTACKS = {name: sorted((ROOT / "tests" / "attacks_found").glob(f"{name.split('_')[0]}_*.ipynb"))
                 for name in NAMES}


def attack_class(name: str, built: Path, tmp_path_factory) -> Path:
    """The assignment's attack class (scripts/assignments.py ATTACK_CLASS), ready to grade;
    the hanging notebook for the demonstration assignment only (it costs its time limits)."""
    folder = tmp_path_factory.mktemp(f"{name}-attacks")
    grade_env("attack-class", name, folder, "--out", built)
    for found in FOUND_ATTACKS[name]:  # the routes cold attacks found, kept caught
        shutil.copy(found, folder / f"found_{found.name}")
    if name != DEMO:
        (folder / "hang.ipynb").unlink()
    else:
        (folder / "rawpatch_late.ipynb").unlink()  # the same check as after the cells
    if name not in GUARD_CHECKS:
        (folder / "rawpatch.ipynb").unlink()
    for attack in RUNNER_ATTACKS:
        if name not in GUARD_CHECKS or (name != DEMO and attack not in TORCH_GUARD_ATTACKS):
            (folder / f"{attack}.ipynb").unlink(missing_ok=True)
    if name != DEMO:
        for attack in SANDBOX_CHECKS:
            (folder / f"{attack}.ipynb").unlink()
    for survivor in SURVIVORS:  # the runner's restart, the same for every assignment
        if survivor not in SURVIVOR_CHECKS.get(name, ()):
            (folder / f"{survivor}.ipynb").unlink()
    return folder


@pytest.fixture(scope="module")
def attacked(gradings) -> dict[str, Path]:
    """Every assignment's attack class, graded."""
    return gradings["attacked"]


@pytest.mark.parametrize("name", NAMES)
def test_attacks_score_no_more_than_the_blank_notebook(name, attacked):
    """Forged channel messages, stack and heap walks, NumPy patched (for good, or only while
    a test runs), always-equal answers, writes to results.json, floods: none scores more
    than the notebook as handed out, unless it is caught ("tampering detected", 0). A crash
    after the answers costs nothing."""
    rows = read_scores(attacked[name])
    blank = float(rows["blank.ipynb"]["points"])
    full = float(rows["blank.ipynb"]["max_points"])
    for attack in ("forge", "stack", "numpy", "restore", "equal", "results", "flood", "hang", "leak", "bomb",
                   "spy", "planted", "selfpatch", "rawpatch", "rawpatch_late"):
        row = rows.get(f"{attack}.ipynb")
        if row is None:
            continue
        assert float(row["points"]) <= blank or row["reason"].startswith("tampering detected"), \
            f"{name}: the {attack} attack scored {row['points']} / {full}, the blank notebook {blank}: {row}"
        assert row["points"] == "0" or not row["reason"].startswith("tampering detected"), row
    if name in GUARD_CHECKS:
        patched = (attacked[name] / "results" / "selfpatch.ipynb.log").read_text()
        assert "SELFPATCH took: []" in patched, \
            f"{name}: a module of minigrad or NumPy was rebound for a moment: {patched[-600:]}"
        planted = (attacked[name] / "feedback" / "planted.ipynb.txt").read_text()
        assert "PLANTED hook=in" not in planted, f"{name}: a planted object added an audit hook of its own"
    else:
        assert not any((attacked[name] / f"{a}.ipynb").exists() for a in RUNNER_ATTACKS)
    for attack in ("rawpatch", "rawpatch_late"):  # patched past the guarded class, put back at once
        row = rows.get(f"{attack}.ipynb")
        if row is None:
            continue
        log = (attacked[name] / "results" / f"{attack}.ipynb.log").read_text()
        assert re.search(r"RAWPATCH took: \['", log), f"{name}: {attack}: no patch took, so none is caught: {log[-600:]}"
        assert row["points"] == "0" and "written past the grader's guard" in row["reason"], \
            f"{name}: a module patched through __globals__ or object.__setattr__ and put back went unseen: {row}"
    for survivor in SURVIVOR_CHECKS.get(name, ()):
        row = rows[f"{survivor}.ipynb"]
        assert float(row["points"]) == full, f"{name}: {survivor} after the answers cost points: {row}"


@pytest.mark.parametrize("name", [n for n in NAMES if FOUND_ATTACKS[n]])
def test_the_attacks_a_cold_attack_found_score_nothing(name, attacked):
    """Each route tests/attacks_found/README.md lists (a lying NumPy scalar, a stdlib
    function swapped under the grader, the runner's message scrubbed, a stash kept as
    bytes) scored up to 15 / 18 on a3 with no solution, undetected: now no more than the
    notebook as handed out."""
    rows = read_scores(attacked[name])
    blank = float(rows["blank.ipynb"]["points"])
    for found in FOUND_ATTACKS[name]:
        row = rows[f"found_{found.name}"]
        assert float(row["points"]) <= blank, f"{found.name} scored {row['points']}: {row}"
    if name == DEMO:
        assert len(FOUND_ATTACKS[name]) >= 4
        scrubbed = [rows[f"found_{f.name}"]["reason"] for f in FOUND_ATTACKS[name] if "scrub" in f.name]
        assert scrubbed and all(r.startswith("tampering detected") for r in scrubbed), scrubbed


@pytest.mark.parametrize("name", NAMES)
def test_a_leaking_notebook_reads_nothing_of_the_tests_or_the_reference(name, attacked):
    """Every graded name tries to read the tests' code and the earlier questions' reference
    (``inspect.getsource``, ``__code__``, ``dis``) and the process's memory (/proc/self/mem,
    its task's, the parent's, through a folder's descriptor, through a symbolic link), then
    raises what it got as its error message, which the feedback shows. Each try is refused."""
    feedback = (attacked[name] / "feedback" / "leak.ipynb.txt").read_text()
    assert "LEAK " in feedback, f"{name}: the leaking notebook's code never ran in a test:\n{feedback[:2000]}"
    got = [ln.strip()[:300] for ln in feedback.splitlines() if "GOT " in ln]
    assert not got, f"{name}: the feedback carries what the notebook read: {got[:3]}"
    tried = set(re.findall(r"memory via (\w+): refused", feedback))
    assert tried == {"mem", "task", "parent", "dir_fd", "symlink"}, f"{name}: {tried}"


def bomb_counts(text: str) -> list[tuple[int, int]]:
    """(processes, threads) each test of the bomb notebook made, from its messages."""
    return [(int(p), int(t)) for p, t in re.findall(r"BOMB made (\d+) processes and (\d+) threads", text)]


def test_a_process_bomb_stops_at_the_process_limit(attacked):
    """Processes started from C (no audit hook sees them) and threads: the kernel's limit
    stops them at ``PROCESS_LIMIT`` more than the sandbox's user had (run as root, each
    sandbox has a host user of its own, so a bomb starves no other submission), and the
    runner ends what a test left running before the next test."""
    for name in (DEMO,):
        counts = bomb_counts((attacked[name] / "feedback" / "bomb.ipynb.txt").read_text())
        assert counts, f"{name}: the bomb notebook's code never ran in a test"
        made = max(p + t for p, t in counts)
        assert 0 < made <= script.PROCESS_LIMIT, \
            f"{name}: a bomb made {made} processes and threads (limit {script.PROCESS_LIMIT})"
        assert len(set(counts)) == 1 or min(p + t for p, t in counts) > 0, \
            f"{name}: a later test could start nothing (what an earlier one left holds the limit): {counts}"


def test_a_hanging_notebook_costs_its_time_limits_only(attacked, gradings):
    """Every graded name hangs (a busy loop): each test that calls one is stopped at its
    limit, in its own process, and the notebook is loaded once (no reload per test); it
    scores no more than the notebook as handed out."""
    hanging = gradings["hanging"]
    detail = json.loads((hanging / "results" / "hang.ipynb.json").read_text())["detail"]
    stopped = [t for t in detail["tests"] if "TimeoutError" in t["message"]]
    assert stopped, "no test of the hanging notebook timed out"
    assert detail["starts"] == 1, f"the runner started {detail['starts']} times"
    budget = 30 + len(stopped) * (HANG_TIMEOUT_S + 2)
    assert detail["seconds"] <= budget, \
        f"{len(stopped)} hanging tests of {HANG_TIMEOUT_S} s took {detail['seconds']} s to grade (bound {budget} s)"
    blank = float(read_scores(attacked[DEMO])["blank.ipynb"]["points"])
    assert float(read_scores(hanging)["hang.ipynb"]["points"]) <= blank


def test_there_are_seven_assignments_with_masters_and_requirements():
    assert len(NAMES) >= 7, f"expected at least seven assignments in assignments/, found {NAMES}"
    pins = (MASTERS / "requirements.txt").read_text()
    assert re.search(r"^otter-grader==7\.0\.0$", pins, re.M), "assignments/requirements.txt must pin otter-grader==7.0.0"
    heavy = [p for p in ("torch", "jax", "deepspeed", "transformers") if re.search(rf"^{p}\b", pins, re.M)]
    assert not heavy, f"the instructors' requirements must stay light, found {heavy}"
    assert not re.search(r"^torch==\S+\+cpu$", (ROOT / "requirements.txt").read_text(), re.M), \
        "requirements.txt pins a +cpu torch without an index URL: pip cannot resolve it from PyPI"


@pytest.mark.parametrize("name", NAMES)
def test_solution_full_marks_student_less_with_readable_feedback(name, demo, graded_all):
    folder, roles = graded(name, demo, graded_all)
    rows = read_scores(folder)
    solution, student = rows[roles["solution"]], rows[roles["student"]]
    full = float(solution["max_points"])
    assert full > 0 and float(solution["points"]) == full and not solution["reason"], \
        f"{name}: the solution scored {solution['points']} / {full} ({solution['reason']})"
    assert float(student["points"]) < full, f"{name}: the unanswered notebook scored full marks"
    assert float(student["points"]) > 0 or student["reason"].startswith("no test passed"), \
        f"{name}: a 0 without its reason: {student}"
    failing = [t for t in results(folder, roles["student"]) if not t["passed"]]
    assert failing
    for t in failing:
        assert "Traceback" not in t["message"], f"{name}: a traceback instead of a message:\n{t['message']}"
        assert re.match(r"^[A-Za-z_.]*(Error|Exception)\w*: .{10,}", t["message"].strip().splitlines()[-1]), \
            f"{name} {t['test']}: a failing test ends without a readable message:\n{t['message']}"
    feedback = (folder / "feedback" / f"{roles['student']}.txt").read_text()
    assert all(t["test"] in feedback for t in failing), f"{name}: the feedback file misses failing tests"


@pytest.mark.parametrize("name", NAMES)
def test_a_subtle_bug_costs_points_once(name, demo, graded_all):
    """The subtly wrong answer passes the public tests and loses hidden points in its own
    question only (the other questions are graded with the reference)."""
    folder, roles = graded(name, demo, graded_all)
    if "subtle" not in roles:
        pytest.skip(f"{name} has no subtly wrong demonstration answer")
    rows = read_scores(folder)
    row = rows[roles["subtle"]]
    assert 0 < float(row["points"]) < float(row["max_points"]), f"{name}: {row}"
    lost = [t for t in results(folder, roles["subtle"]) if not t["passed"]]
    assert all(t["hidden"] for t in lost), f"{name}: the subtle bug fails public tests: {lost}"
    assert len({t["question"] for t in lost}) == 1, f"{name}: one bug lost points in several questions: {lost}"


@pytest.mark.parametrize("name", NAMES)
def test_tampering_scores_zero_with_the_reason(name, demo, graded_all):
    folder, roles = graded(name, demo, graded_all)
    row = read_scores(folder)[roles["tampering"]]
    assert row["points"] == "0" and row["reason"].startswith("tampering detected"), row
    assert "ExceptionTestFile.run" in row["reason"] or "minigrad.memory.track" in row["reason"], row


def test_demo_class_fair_scores(demo, built):
    rows = read_scores(demo)
    assert (demo / ".DS_Store").is_file()  # a hidden file is in the folder, and gets no row
    assert sorted(rows) == sorted(script.DEMO_CLASS), f"one row per file expected, got {sorted(rows)}"
    full = float(rows["alice.ipynb"]["max_points"])
    for who in ("alice.ipynb", "sybil.ipynb", "victor.ipynb"):
        assert float(rows[who]["points"]) == full and not rows[who]["reason"], f"{who}: {rows[who]}"
    payload = json.loads((built / DEMO / "autograder" / "grader" / "payload.json").read_text())
    q1 = sum(c["points"] for c in script.driver.test_cases(payload["questions"]["q1"]["tests"]))
    assert float(rows["bob.ipynb"]["points"]) == full - q1, "partial credit: bob answered all but q1"
    # dave hangs on more than three segments: only the tests that give those are lost
    dave = results(demo, "dave.ipynb")
    lost = {t["test"] for t in dave if not t["passed"]}
    assert lost == {"test_random_segmentations_are_bit_identical_and_use_checkpoint",
                    "test_segments_save_the_memory_they_should"}, lost
    assert all("TimeoutError" in t["message"] for t in dave if not t["passed"])
    assert float(rows["dave.ipynb"]["points"]) == full - sum(t["points"] for t in dave if not t["passed"])
    # ivan forgets the recomputation in the peak: only the test where it matters fails
    ivan = {t["test"] for t in results(demo, "ivan.ipynb") if not t["passed"]}
    assert "test_peak_reached_during_recomputation" in ivan and \
        ivan <= {"test_peak_reached_during_recomputation", "test_peak_matches_the_ledger"}, ivan
    expected_reason = {"carol.ipynb": "no test passed",
                       "erin.ipynb": "malformed notebook (NotJSONError",
                       "frank.txt": "not a notebook: frank.txt does not end in .ipynb",
                       "grace.ipynb": "no test passed",
                       "heidi.ipynb": f"not a notebook of {DEMO}",
                       "mallory.ipynb": "tampering detected: "}
    for submission, reason in expected_reason.items():
        row = rows[submission]
        assert row["points"] == "0" and row["max_points"] == rows["alice.ipynb"]["max_points"], row
        assert row["reason"].startswith(reason), f"{submission}: reason {row['reason']!r}, expected {reason!r}..."
    for row in rows.values():
        assert row["points"] != "0" or row["reason"], f"a 0 without a reason: {row}"
    # grace's cell that ends the process is skipped when the runner starts again, and says so
    grace = (demo / "feedback" / "grace.ipynb.txt").read_text()
    assert "skipped (it ended or stalled the process when graded)" in grace, grace[:1500]


def test_the_saboteur_finds_nothing_and_harms_no_one(demo, built):
    """sybil looked for every other submission, the payload, the zip and the hidden tests,
    by their real paths and by walking the file system, and tried to overwrite them."""
    log = (demo / "results" / "sybil.ipynb.log").read_text()
    reports = [json.loads(line.split("SABOTAGE REPORT ", 1)[1]) for line in log.splitlines()
               if line.startswith("SABOTAGE REPORT ")]
    assert reports, "the saboteur's cell did not run"
    hidden = hidden_test_names(built, DEMO)
    for report in reports:
        for path, text in report["read"].items():
            assert not any(h in text for h in hidden), f"the saboteur read hidden test text from {path}"
            if path.startswith(str(demo)) or path.startswith(str(built)):
                assert text in ("FileNotFoundError", "PermissionError", "OSError"), f"read {path}: {text[:80]}"
        written = [os.path.normpath(os.path.join("/scratch", p)) for p in report["overwritten"]]
        outside = [p for p in written if not p.startswith(("/scratch/", "/tmp/"))]
        assert not outside, f"the saboteur wrote outside its scratch folder: {outside}"
        assert len(report["processes"]) <= 3 and not any("assignments.py" in p for p in report["processes"]), \
            f"the saboteur saw other processes: {report['processes']}"
    assert (demo / "alice.ipynb").read_text() == (built / DEMO / "autograder" / f"{DEMO}.ipynb").read_text()


# A Checkpoint that runs minigrad's own checkpoint, reached as LIBRARY (defined before it).
LIBRARY_CHECKPOINT = """
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.run = fn
        ctx.save_for_backward(x)
        with no_grad():
            return LIBRARY(fn, Tensor(x)).data

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        xr = Tensor(x, requires_grad=True)
        LIBRARY(ctx.run, xr).backward(grad)
        return xr.grad, None
"""

SHORTCUTS = {
    # (assignment, graded name, replacement, question)
    "subclass": ("a3_checkpoint", "Checkpoint", "from minigrad.checkpoint import Checkpoint as _Library\n\n"
                                                "class Checkpoint(_Library):\n    pass\n", "q1"),
    # a recompiled copy of the library's source
    "vendored": ("a3_checkpoint", "Checkpoint", """import inspect, minigrad.checkpoint
_copy = {"__name__": "mine"}
exec(compile(inspect.getsource(minigrad.checkpoint), "mine.py", "exec"), _copy)
LIBRARY = _copy["checkpoint"]
""" + LIBRARY_CHECKPOINT, "q1"),
    # the library's function, kept in a list before any test runs
    "stashed": ("a3_checkpoint", "Checkpoint", """import minigrad.checkpoint
_kept = [minigrad.checkpoint.checkpoint]
LIBRARY = _kept[0]
""" + LIBRARY_CHECKPOINT, "q1"),
    "planner": ("a4_planning", "optimal_plan", "def optimal_plan(a, m, c, budget):\n"
                                               "    import minigrad.plan\n"
                                               "    return minigrad.plan.optimal_segments(a, m, c, budget)\n", "q3"),
}


def add_shortcut(kind: str, built: Path, folder: Path) -> Path:
    """The assignment's solution with one graded name replaced by a library shortcut,
    written into ``folder`` (graded with the assignment's attack class); returns it."""
    import nbformat as nbf

    name, fn, source, _ = SHORTCUTS[kind]
    solution = nbf.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
    path = folder / f"shortcut_{kind}.ipynb"
    nbf.write(script._replace_definition(solution, fn, source), path)
    return path


def test_library_shortcuts_are_refused(gradings):
    """A Checkpoint that subclasses the library's, runs a copy of its source, or calls it
    through a reference kept before the test; a DP that calls minigrad.plan: the hidden
    tests of that question give nothing, the other questions lose nothing."""
    for kind, path in gradings["shortcuts"].items():
        question = SHORTCUTS[kind][3]
        tests = results(path.parent, path.name)
        hidden = [t for t in tests if t["question"] == question and t["hidden"]]
        assert hidden and not any(t["passed"] for t in hidden), \
            f"{kind}: a library shortcut earned hidden points: {[t['test'] for t in hidden if t['passed']]}"
        assert any("forbid" in t["message"] for t in hidden), [t["message"] for t in hidden]
        others = [t for t in tests if t["question"] != question]
        assert all(t["passed"] for t in others), f"{kind}: the shortcut cost other questions points"


@pytest.mark.parametrize("uid", [None, script.SANDBOX_UIDS.start])
def test_sandbox_sees_no_repository_and_no_submissions(built, uid):
    cmd = script.sandbox_command(built / DEMO / "autograder" / "grader" / "lib", uid)
    if uid is not None and script.root_mode():  # root mounts, then the runner drops every privilege
        i = cmd.index("setpriv")
        assert cmd[i:i + 7] == ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                                "--inh-caps=-all"], cmd[i:i + 8]
        assert "--unshare-net" in cmd and "--unshare-pid" in cmd
    binds = [cmd[i + 1] for i, arg in enumerate(cmd) if arg in ("--ro-bind", "--bind", "--ro-bind-try")]
    assert str(built / DEMO / "autograder" / "grader" / "lib") in binds
    assert "--bind" not in cmd, "nothing of the host may be writable in the sandbox"
    for src in binds:
        path = Path(src)
        assert path != ROOT and ROOT not in path.parents or ".venv" in src or src.startswith(str(built)), \
            f"the sandbox binds {src}, inside the repository"
        assert "payload.json" not in src and not src.endswith("autograder")
    tmpfs = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--tmpfs"]
    assert sorted(tmpfs) == ["/scratch", "/tmp"], tmpfs
    for i, arg in enumerate(cmd):
        if arg == "--tmpfs":
            assert cmd[i - 2] == "--size" and int(cmd[i - 1]) <= 64 << 20, f"{cmd[i + 1]} has no size limit"
    assert ("--unshare-all" in cmd or "setpriv" in cmd) and "--die-with-parent" in cmd
    assert script.check_sandbox() is None, "bubblewrap does not work here: run scripts/ensure_bwrap.sh"


def test_seed_of_the_hidden_inputs_is_the_instructors(built):
    for name in NAMES:
        payload = json.loads((built / name / "autograder" / "grader" / "payload.json").read_text())
        assert payload["seed"] == SEED
        text = "\n".join(spec["tests"] for spec in payload["questions"].values())
        for fixed in re.findall(r"default_rng\((\d+)\)", text):
            pytest.fail(f"{name}: a hidden test draws from the fixed seed {fixed}, not the build's")


@pytest.mark.parametrize("name", NAMES)
def test_no_solution_code_and_no_hidden_test_reaches_students(name, built):
    master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
    student = nbformat.read(built / name / "student" / f"{name}.ipynb", as_version=4)
    assert script.solution_leaks(master, student) == [], f"{name}: solution code in the student notebook"
    student_tests = {p.name: p.read_text() for p in (built / name / "student" / "tests").glob("*.py")}
    all_tests = {p.name: p.read_text() for p in (built / name / "autograder" / "tests").glob("*.py")}
    assert student_tests and set(student_tests) == set(all_tests), f"{name}: student tests {sorted(student_tests)}"
    text = "\n".join(c.source for c in student.cells)
    for question, source in all_tests.items():
        cases = script.driver.test_cases(source)
        public = [c["test"] for c in cases if not c["hidden"]]
        hidden = [c["test"] for c in cases if c["hidden"]]
        assert public and hidden, f"{name} {question}: every question needs public and hidden tests"
        assert [c["test"] for c in script.driver.test_cases(student_tests[question])] == public, \
            f"{name} {question}: the student's tests are not exactly the public ones"
        for fn in hidden:
            assert fn not in student_tests[question] and fn not in text, f"{name}: hidden test {fn} reaches students"
        assert f'grader.check("{question[:-3]}")' in text, f"{name}: no grader.check for {question[:-3]}"
    prose = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    assert script.OTTER_CHECK_ALL_TEXT not in prose and script.CHECK_ALL_TEXT in prose, \
        f"{name}: the text above grader.check_all() must say that it runs the public tests only"


def test_public_tests_pass_with_check_all_in_the_solution(built, tmp_path):
    """What a student does locally: grader.check_all() in the solved notebook's folder runs
    the public tests (otter, in the student's own process) and they pass."""
    name = DEMO
    work = tmp_path / name
    shutil.copytree(built / name / "student", work)
    solution = nbformat.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
    code = "\n".join(c["source"] for c in script.driver.export_cells(solution))
    code = ("import otter\ngrader = otter.Notebook()\n" + code +
            "\nresult = grader.check_all()\nprint('CHECKALL', result.total, result.possible)\n")
    proc = subprocess.run([str(GRADE_PY), "-c", code], cwd=work, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    total, possible = proc.stdout.split("CHECKALL")[-1].split()
    assert float(total) == float(possible) > 0, proc.stdout[-1500:]


def test_a_solution_outside_raw_cells_is_caught(built, tmp_path):
    """otter strips `# BEGIN SOLUTION` code only inside raw BEGIN/END SOLUTION cells: a
    master that forgets them leaks, and the leak check (run by every build) says so."""
    name = NAMES[0]
    master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
    first = next(i for i, c in enumerate(master.cells)
                 if c.cell_type == "raw" and c.source.strip() == "# BEGIN SOLUTION")
    end = next(i for i in range(first, len(master.cells))
               if master.cells[i].cell_type == "raw" and master.cells[i].source.strip() == "# END SOLUTION")
    del master.cells[end], master.cells[first]
    nbformat.write(master, tmp_path / f"{name}.ipynb")
    proc = subprocess.run([str(GRADE_PY), "-m", "otter", "assign", "--no-run-tests", str(tmp_path / f"{name}.ipynb"),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    leaked = nbformat.read(tmp_path / "out" / "student" / f"{name}.ipynb", as_version=4)
    assert script.solution_leaks(master, leaked), "the leak check missed solution code outside raw cells"
    solved = nbformat.read(built / name / "autograder" / f"{name}.ipynb", as_version=4)
    assert script.solution_leaks(master, solved), "the leak check missed a complete solution notebook"


@pytest.mark.parametrize("name", NAMES)
def test_book_shows_the_current_student_version(name, built):
    fresh, book = built / name / "student", BOOK / name
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    shown = sorted(p.relative_to(book).as_posix() for p in book.rglob("*") if p.is_file())
    assert files == shown, f"{name}: book/assignments/{name} holds {shown}, the build {files}: run `make assignments`"
    for f in files:
        assert (fresh / f).read_text() == (book / f).read_text(), \
            f"book/assignments/{name}/{f} is not the current student version: run `make assignments`"
    nb = nbformat.read(book / f"{name}.ipynb", as_version=4)
    assert nb.metadata.get("mystnb", {}).get("execution_mode") == "off", \
        f"{name}: the book must not execute the student version (it contains `...` placeholders)"


@pytest.mark.parametrize("name", NAMES)
def test_setup_cell_installs_the_pinned_versions(name):
    master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
    setup = next(c for c in master.cells if c.cell_type == "code").source
    pin = re.search(r"^otter-grader==\S+$", (MASTERS / "requirements.txt").read_text(), re.M).group(0)
    url = config()["repository"]["url"]
    assert f'ASSIGNMENT = "{name}"' in setup, f"{name}: the setup cell must name its assignment"
    # The repository has no release tags: the line installs minigrad as the repository
    # stands (a ref it lacks would fail in every student's Colab), as the book's own
    # setup cell does.
    assert f'%pip install --quiet "minigrad @ git+{url}" "{pin}"' in setup, \
        f"{name}: the setup cell must install minigrad from {url} (no tag) and {pin}"
    assert f'REPOSITORY = "{url}"' in setup and "book/assignments/{ASSIGNMENT}/tests" in setup, \
        f"{name}: the setup cell must fetch the public tests from the book's copy in the repository"


@pytest.mark.parametrize("name", NAMES)
def test_points_table_states_what_is_graded(name, built):
    master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
    intro = next(c.source for c in master.cells if c.cell_type == "markdown")
    table = {q: (int(total), int(public), int(hidden)) for q, total, public, hidden in
             re.findall(r"^\| (q\d+) \|[^|]*\| (\d+) \((\d+) \+ (\d+)\) \|$", intro, re.M)}
    actual = {}
    for path in sorted((built / name / "autograder" / "tests").glob("*.py")):
        cases = script.driver.test_cases(path.read_text())
        public = sum(c["points"] for c in cases if not c["hidden"])
        hidden = sum(c["points"] for c in cases if c["hidden"])
        actual[path.stem] = (int(public + hidden), int(public), int(hidden))
    assert table == actual, f"{name}: the points table says {table}, the tests give {actual}"
    total = re.search(r"\*\*Total\*\* \| \*\*(\d+)\*\*", intro)
    assert total and int(total.group(1)) == sum(t for t, _, _ in actual.values()), f"{name}: wrong total"


def test_book_sample_scores_are_this_run(demo):
    """book/assignments/sample_scores.csv came from `demo-class` + `grade`: same rows."""
    with open(BOOK / "sample_scores.csv", newline="") as f:
        sample = {r["submission"]: r for r in csv.DictReader(f)}
    rows = read_scores(demo)
    assert sorted(sample) == sorted(rows)
    for name, row in rows.items():
        got = (row["points"], row["max_points"], row["reason"].split(":")[0])
        want = (sample[name]["points"], sample[name]["max_points"], sample[name]["reason"].split(":")[0])
        assert got == want, f"{name}: this run gives {got}, the book's sample {want}: regenerate the sample"


def test_student_notebook_finds_its_tests_when_opened_alone(tmp_path):
    """What Colab's launch button does: the notebook alone in an empty folder. The setup
    cell clones the public tests from the repository (here this checkout's HEAD)."""
    name = NAMES[0]
    nb = nbformat.read(BOOK / name / f"{name}.ipynb", as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code").source
    url = config()["repository"]["url"]
    committed = subprocess.run(["git", "-C", str(ROOT), "ls-files", f"book/assignments/{name}/tests"],
                               capture_output=True, text=True).stdout.split()
    if not committed:
        pytest.fail(f"book/assignments/{name}/tests is not committed: Colab could not fetch it")
    code = "\n".join(line for line in setup.replace(url, ROOT.as_uri()).splitlines()
                     if not line.strip().startswith("%pip"))  # minigrad and otter are installed here
    code += "\nprint(sorted(p.name for p in pathlib.Path('tests').iterdir()), type(grader).__name__)"
    workdir = tmp_path / "content"
    workdir.mkdir()
    proc = subprocess.run([str(GRADE_PY), "-c", code], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    expected = sorted(p.name for p in (BOOK / name / "tests").glob("*.py"))
    assert proc.stdout.strip().splitlines()[-1] == f"{expected} Notebook", proc.stdout
    for test_file in expected:
        assert (workdir / "tests" / test_file).read_text() == (BOOK / name / "tests" / test_file).read_text()


def fake_bin(tmp_path, uid: int, apt: bool):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text(f"#!{shutil.which('bash')}\necho {uid}\n")
    if apt:
        (bin_dir / "apt-get").write_text(f'#!{shutil.which("bash")}\necho "$@" >> {tmp_path}/apt.log\n'
                                         f'if [ "$1" = install ]; then echo "#!/bin/sh" > {bin_dir}/bwrap; '
                                         f'{shutil.which("chmod")} +x {bin_dir}/bwrap; fi\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("uid,apt", [(1000, True), (0, True)])
def test_make_grade_checks_for_bubblewrap(tmp_path, uid, apt):
    """Like chromium for make test: installed as root with apt-get, else one clear line."""
    bin_dir = fake_bin(tmp_path, uid, apt)
    proc = subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "ensure_bwrap.sh")], capture_output=True,
                          text=True, env={"PATH": str(bin_dir)}, timeout=60)
    if uid == 0:
        assert proc.returncode == 0, proc.stderr
        assert "install -y -qq bubblewrap" in (tmp_path / "apt.log").read_text()
    else:
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and "apt-get install bubblewrap" in lines[0]
        assert not (tmp_path / "apt.log").exists()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^grade: .*\bbwrap\b", makefile, re.M) and "scripts/ensure_bwrap.sh" in makefile


def test_book_lists_the_assignments_and_the_instructor_page():
    entries = toc_files()
    wanted = ["book/assignments/instructors"] + [f"book/assignments/{n}/{n}" for n in NAMES]
    missing = [w for w in wanted if w not in entries]
    assert not missing, f"_toc.yml lacks {missing}: list them under its Assignments part"
    page = (BOOK / "instructors.md").read_text()
    hidden = set()
    for name in NAMES:
        master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
        for cell in master.cells:
            if cell.cell_type == "code" and "hidden: true" in cell.source:
                hidden.add(re.search(r"^def (test_\w+)\(", cell.source, re.M).group(1))
    undocumented = sorted(fn for fn in hidden if fn not in page)
    assert not undocumented, f"the instructor page does not describe the hidden tests {undocumented}"
    for command in ("make assignments", "SEED=", "make grade ASSIGNMENT=", "demo-class", "sample_scores.csv",
                    "bubblewrap", "Gradescope", "feedback/"):
        assert command in page, f"the instructor page must show `{command}`"


@pytest.mark.parametrize("name", NAMES)
def test_assignment_page_has_colab_button(name):
    page = HTML / "book" / "assignments" / name / f"{name}.html"
    assert page.is_file(), f"{page} was not built: run `make book`"
    repo = config()["repository"]["url"].removeprefix("https://github.com/")
    expected = f"https://colab.research.google.com/github/{repo}/blob/main/book/assignments/{name}/{name}.ipynb"
    links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page.read_text())
    assert expected in links, f"{page.name}: Colab link {expected} not found; found {links}"
