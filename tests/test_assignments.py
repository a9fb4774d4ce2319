"""The course assignments (assignments/, scripts/assignments.py, the book's Assignments part).

For every assignment: `otter assign` builds it, the solution scores full marks and the
notebook as handed out scores less, with a readable message for each failing test; no
solution code and no hidden test reaches the student; the book shows the current student
version. Grading survives what students hand in: an infinite loop, a crash, a malformed
file, a text file, another assignment's notebook (the book's sample scores.csv is this
run's). The student notebook finds its public tests when opened alone, as in Colab.

otter-grader lives in its own environment, .venv-grade (see assignments/requirements.txt);
these tests run it as a subprocess. `make test` creates it; so does `make assignments`.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import psutil
import pytest

from bookpaths import HTML, ROOT, config, toc_files

pytestmark = pytest.mark.book

GRADE_PY = ROOT / ".venv-grade" / "bin" / "python"
SCRIPT = ROOT / "scripts" / "assignments.py"
MASTERS = ROOT / "assignments"
BOOK = ROOT / "book" / "assignments"
NAMES = sorted(p.parent.name for p in MASTERS.glob("*/*.ipynb") if p.stem == p.parent.name)
CLASS_TIMEOUT_S = 40  # the time limit of the demonstration class (and of the book's sample)

# scripts/assignments.py, loaded by path (its module-level code needs no otter).
_spec = importlib.util.spec_from_file_location("assignments_script", SCRIPT)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


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


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built")
    grade_env("build", "--out", out, "--no-run-tests", "--jobs", 2)  # the graded runs check the solutions
    return out


@pytest.fixture(scope="module")
def demo(built, tmp_path_factory) -> tuple[Path, Path]:
    """The demonstration class of assignment 1, graded: (submissions folder, pid file)."""
    folder = tmp_path_factory.mktemp("class")
    pid_file = tmp_path_factory.mktemp("pid") / "dave.pid"
    grade_env("demo-class", NAMES[0], folder, "--out", built, "--pid-file", pid_file)
    grade_env("grade", NAMES[0], folder, "--out", built, "--timeout", CLASS_TIMEOUT_S, "--jobs", 2)
    return folder, pid_file


def graded(name: str, built: Path, demo, tmp_path: Path) -> tuple[Path, str, str]:
    """(folder, solution's file name, student's file name) of a graded pair for ``name``."""
    if name == NAMES[0]:
        return demo[0], "alice.ipynb", "carol.ipynb"
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(built / name / "autograder" / f"{name}.ipynb", folder / "solution.ipynb")
    shutil.copy(built / name / "student" / f"{name}.ipynb", folder / "student.ipynb")
    grade_env("grade", name, folder, "--out", built, "--jobs", 2)
    return folder, "solution.ipynb", "student.ipynb"


def failed_cases(results_json: Path) -> list[str]:
    """Every failing test case's report in otter's results (one string per case)."""
    cases = []
    for test in json.loads(results_json.read_text())["tests"]:
        if "score" not in test or test["score"] == test["max_score"]:
            continue
        cases += [c for c in re.split(r"\n\s*\w+ - \d+ result:\n", test["output"]) if "Test case failed" in c]
    return cases


def test_there_are_five_assignments_with_masters_and_requirements():
    assert len(NAMES) >= 5, f"expected at least five assignments in assignments/, found {NAMES}"
    pins = (MASTERS / "requirements.txt").read_text()
    assert re.search(r"^otter-grader==7\.0\.0$", pins, re.M), "assignments/requirements.txt must pin otter-grader==7.0.0"


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks_and_student_less_with_readable_failures(name, built, demo, tmp_path):
    folder, solution, student = graded(name, built, demo, tmp_path)
    rows = read_scores(folder)
    full = float(rows[solution]["max_points"])
    assert full > 0
    assert float(rows[solution]["points"]) == full and not rows[solution]["reason"], \
        f"{name}: the solution scored {rows[solution]['points']} / {full} ({rows[solution]['reason']})"
    assert not rows[student]["reason"], f"{name}: the student notebook was not graded: {rows[student]['reason']}"
    assert float(rows[student]["points"]) < full, f"{name}: the unsolved student notebook scored full marks"
    cases = failed_cases(folder / "results" / f"{student}.json")
    assert cases, f"{name}: the student notebook lost points but no failing test case was reported"
    for case in cases:
        assert "Traceback" not in case, f"{name}: a failing test reports a traceback instead of a message:\n{case}"
        last = case.strip().splitlines()[-1].strip()
        assert re.match(r"^[A-Za-z_.]*(Error|Exception)\w*: .{10,}", last), \
            f"{name}: a failing test ends without a readable message:\n{case}"


def test_grading_survives_bad_submissions_and_gives_partial_credit(demo, built):
    folder, pid_file = demo
    rows = read_scores(folder)
    assert (folder / ".DS_Store").is_file()  # a hidden file is in the folder, and gets no row
    assert sorted(rows) == sorted(script.DEMO_CLASS), f"one row per file expected, got {sorted(rows)}"
    full = float(rows["alice.ipynb"]["max_points"])
    q1_points = sum(p for _, p, _ in _test_cases((built / NAMES[0] / "autograder" / "tests" / "q1.py").read_text()))
    assert float(rows["bob.ipynb"]["points"]) == full - q1_points, "partial credit: bob answered all but q1"
    expected_reason = {"dave.ipynb": f"time limit exceeded: grading took longer than {CLASS_TIMEOUT_S} s",
                       "erin.ipynb": "malformed notebook (NotJSONError",
                       "frank.txt": "not a notebook: frank.txt does not end in .ipynb",
                       "grace.ipynb": "grading failed (exit code 1): nbclient.exceptions.DeadKernelError",
                       "heidi.ipynb": f"not a notebook of {NAMES[0]}"}
    for submission, reason in expected_reason.items():
        row = rows[submission]
        assert row["points"] == "0" and row["max_points"] == rows["alice.ipynb"]["max_points"], row
        assert row["reason"].startswith(reason), f"{submission}: reason {row['reason']!r}, expected {reason!r}..."
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, \
        f"the looping submission's kernel (pid {pid}) still runs after its time limit"


def test_book_sample_scores_are_this_run(demo):
    """book/assignments/sample_scores.csv came from `demo-class` + `grade`: same rows."""
    with open(BOOK / "sample_scores.csv", newline="") as f:
        sample = {r["submission"]: r for r in csv.DictReader(f)}
    rows = read_scores(demo[0])
    assert sorted(sample) == sorted(rows)
    for name, row in rows.items():
        got = (row["points"], row["max_points"], row["reason"].split(":")[0])
        want = (sample[name]["points"], sample[name]["max_points"], sample[name]["reason"].split(":")[0])
        assert got == want, f"{name}: this run gives {got}, the book's sample {want}: regenerate the sample"


def _test_cases(text: str) -> list[tuple[str, float, bool]]:
    """(function name, points, hidden) of every test case of an otter test file."""
    found = re.findall(r"@test_case\(points=([\d.]+), hidden=(True|False).*?\)\ndef (\w+)\(", text, re.S)
    return [(fn, float(points), hidden == "True") for points, hidden, fn in found]


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
        cases = _test_cases(source)
        public = [c for c in cases if not c[2]]
        hidden = [c for c in cases if c[2]]
        assert public and hidden, f"{name} {question}: every question needs public and hidden tests"
        assert [c[0] for c in _test_cases(student_tests[question])] == [c[0] for c in public], \
            f"{name} {question}: the student's tests are not exactly the public ones"
        for fn, _, _ in hidden:
            assert fn not in student_tests[question] and fn not in text, f"{name}: hidden test {fn} reaches students"
        assert f'grader.check("{question[:-3]}")' in text, f"{name}: no grader.check for {question[:-3]}"
    # The check-all cell runs the public tests only, and its text says so.
    prose = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    assert script.OTTER_CHECK_ALL_TEXT not in prose and script.CHECK_ALL_TEXT in prose, \
        f"{name}: the text above grader.check_all() must say that it runs the public tests only"


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
    assert f'%pip install --quiet "minigrad @ git+{url}" "{pin}"' in setup, \
        f"{name}: the setup cell must install minigrad from {url} and {pin}"
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
        cases = _test_cases(path.read_text())
        public = sum(p for _, p, h in cases if not h)
        hidden = sum(p for _, p, h in cases if h)
        actual[path.stem] = (int(public + hidden), int(public), int(hidden))
    assert table == actual, f"{name}: the points table says {table}, the tests give {actual}"
    total = re.search(r"\*\*Total\*\* \| \*\*(\d+)\*\*", intro)
    assert total and int(total.group(1)) == sum(t for t, _, _ in actual.values()), f"{name}: wrong total"


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


def test_book_lists_the_assignments_and_the_instructor_page():
    entries = toc_files()
    wanted = ["book/assignments/instructors"] + [f"book/assignments/{n}/{n}" for n in NAMES]
    missing = [w for w in wanted if w not in entries]
    assert not missing, f"_toc.yml lacks {missing}: add them to scripts/write_toc.py"
    page = (BOOK / "instructors.md").read_text()
    hidden = set()
    for name in NAMES:
        master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
        for cell in master.cells:
            if cell.cell_type == "code" and "hidden: true" in cell.source:
                hidden.add(re.search(r"^def (test_\w+)\(", cell.source, re.M).group(1))
    undocumented = sorted(fn for fn in hidden if fn not in page)
    assert not undocumented, f"the instructor page does not describe the hidden tests {undocumented}"
    for command in ("make assignments", "make grade ASSIGNMENT=", "demo-class", "sample_scores.csv"):
        assert command in page, f"the instructor page must show `{command}`"


@pytest.mark.parametrize("name", NAMES)
def test_assignment_page_has_colab_button(name):
    page = HTML / "book" / "assignments" / name / f"{name}.html"
    assert page.is_file(), f"{page} was not built: run `make book`"
    repo = config()["repository"]["url"].removeprefix("https://github.com/")
    expected = f"https://colab.research.google.com/github/{repo}/blob/main/book/assignments/{name}/{name}.ipynb"
    links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page.read_text())
    assert expected in links, f"{page.name}: Colab link {expected} not found; found {links}"
