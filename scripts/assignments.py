"""Build and grade the course assignments (otter-grader 7, no Docker).

Usage (the Makefile's `assignments` and `grade` targets call these; run it with the
grading environment's Python, .venv-grade/bin/python):

    python scripts/assignments.py build [NAME ...] [--out DIR] [--no-run-tests] [--book] [--jobs N]
    python scripts/assignments.py grade NAME SUBMISSIONS_DIR [--timeout SECONDS] [--out DIR] [--jobs N]
    python scripts/assignments.py demo-class NAME DEST [--out DIR] [--pid-file PATH]
    python scripts/assignments.py link-venv GRADE_VENV BOOK_VENV

``build`` runs ``otter assign`` on ``assignments/<name>/<name>.ipynb`` (the master notebook)
and writes otter's layout to ``<out>/<name>/student/`` (the notebook to hand out and its
public tests) and ``<out>/<name>/autograder/`` (the solution notebook, every test and the
autograder zip); ``--book`` also copies the student folder to
``book/assignments/<name>/``, the page the book shows and Colab opens.

``grade`` grades every file of SUBMISSIONS_DIR (hidden files aside) with ``otter run``,
one process per submission with a time limit, and writes SUBMISSIONS_DIR/scores.csv with
the columns ``submission,points,max_points,reason`` (``reason`` is empty for a
submission that was graded; otherwise it says why it scored 0: not a notebook, malformed, another
assignment's notebook, over the time limit, or the grading process crashed). otter's
feedback for each submission (every test's message) goes to SUBMISSIONS_DIR/results/.
``otter run`` executes the student's code as the calling user: run it in a container or
as an unprivileged user (see the instructor page of the book).

``demo-class`` writes a folder of made-up submissions (a solution, a partial one, an
unanswered one, an infinite loop, a crash, a malformed file, a text file, another
assignment's notebook) to try ``grade`` on; the book's sample scores.csv comes from it.

``link-venv`` makes the grading environment see the book's: otter-grader and what it
adds live in their own virtual environment, which imports minigrad, NumPy and torch from
the book's through a ``.pth`` file (so the book's own environment stays without otter).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MASTERS = ROOT / "assignments"
BUILD = ROOT / "_build" / "assignments"
BOOK = ROOT / "book" / "assignments"
SCORES_COLUMNS = ["submission", "points", "max_points", "reason"]
DEFAULT_TIMEOUT_S = 300


def assignment_names() -> list[str]:
    """Every assignment: a folder of assignments/ holding a master notebook of its name."""
    return sorted(p.parent.name for p in MASTERS.glob("*/*.ipynb") if p.stem == p.parent.name)


def _check_name(name: str) -> str:
    names = assignment_names()
    if name not in names:
        raise SystemExit(f"unknown assignment {name!r}; the assignments are: {', '.join(names)}")
    return name


# --- build -----------------------------------------------------------------------------
def build(name: str, out: Path, run_tests: bool = True) -> Path:
    """``otter assign`` the master of ``name`` into ``out/name`` (replaced); returns that folder."""
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "otter", "assign", str(MASTERS / name / f"{name}.ipynb"), str(dest)]
    if not run_tests:
        cmd.append("--no-run-tests")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"otter assign failed for {name}:\n{proc.stdout}\n{proc.stderr}")
    for notebook in (dest / "student" / f"{name}.ipynb", dest / "autograder" / f"{name}.ipynb"):
        _finish_notebook(notebook)
    check_no_leaks(name, dest)
    return dest


# otter's text above the `grader.check_all()` cell, and what it says in ours: the cell runs
# the tests in tests/, which in the student's folder are the public ones only.
OTTER_CHECK_ALL_TEXT = "To double-check your work, the cell below will rerun all of the autograder tests."
CHECK_ALL_TEXT = ("To double-check your work, the cell below reruns every public test, those that "
                  "`grader.check` runs. Your instructor also grades with hidden tests, which it does "
                  "not run: passing it is necessary, not sufficient.")


def _finish_notebook(path: Path) -> None:
    """Give every cell of a generated notebook a fixed id (otter invents random ones for the
    cells it adds), so that building twice writes the same file, and say what its
    check-all cell runs (`CHECK_ALL_TEXT`)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell{i:03d}"
        if cell.cell_type == "markdown" and OTTER_CHECK_ALL_TEXT in cell.source:
            cell.source = cell.source.replace(OTTER_CHECK_ALL_TEXT, CHECK_ALL_TEXT)
    nbformat.write(nb, path)


def _solution_lines(master) -> tuple[set[str], set[str]]:
    """(lines of solution code, every other code line) of a master notebook, stripped.

    Solution code is what otter strips: lines between ``# BEGIN SOLUTION`` and
    ``# END SOLUTION`` comments and lines ending in ``# SOLUTION``, in any code cell."""
    solution, other = set(), set()
    for cell in master.cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            text = line.strip()
            if text.endswith("# BEGIN SOLUTION") or text.endswith("# BEGIN SOLUTION NO PROMPT"):
                inside = True
            elif text.endswith("# END SOLUTION"):
                inside = False
            elif inside:
                solution.add(text)
            elif text.endswith("# SOLUTION"):
                solution.add(text[: -len("# SOLUTION")].strip())
            else:
                other.add(text)
    return solution, other


def solution_leaks(master, student) -> list[str]:
    """Lines of solution code (found only in the master's solutions) that the student
    notebook contains, and any solution marker left in it. Empty when nothing leaked."""
    solution, other = _solution_lines(master)
    secret = {line for line in solution - other if line}
    leaks = []
    for cell in student.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            text = line.strip()
            if text in secret or "# SOLUTION" in text or "BEGIN SOLUTION" in text:
                leaks.append(text)
    return leaks


def check_no_leaks(name: str, built: Path) -> None:
    """Raise SystemExit if the student version of ``name`` contains solution code."""
    import nbformat

    master = nbformat.read(MASTERS / name / f"{name}.ipynb", as_version=4)
    student = nbformat.read(built / "student" / f"{name}.ipynb", as_version=4)
    leaks = solution_leaks(master, student)
    if leaks:
        raise SystemExit(f"{name}: the student notebook contains solution code (wrap the cell in raw "
                         f"`# BEGIN SOLUTION` / `# END SOLUTION` cells): {leaks[:5]}")


def publish(name: str, built: Path) -> Path:
    """Copy the student folder of a built assignment to book/assignments/<name>/."""
    dest = BOOK / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(built / "student", dest)
    return dest


def autograder_zip(built: Path) -> Path:
    """The autograder zip otter assign wrote into ``built/autograder`` (its name has a timestamp)."""
    zips = sorted((built / "autograder").glob("*-autograder_*.zip"), key=lambda p: p.stat().st_mtime)
    if not zips:
        raise SystemExit(f"no autograder zip in {built / 'autograder'}: run `make assignments` first")
    return zips[-1]


# --- grade -----------------------------------------------------------------------------
def points_by_question(zip_path: Path) -> dict[str, float]:
    """Each question's points in an autograder zip (its tests' ``points``), in test order."""
    points = {}
    with zipfile.ZipFile(zip_path) as z:
        for member in sorted(z.namelist()):
            if member.startswith("tests/") and member.endswith(".py"):
                namespace: dict = {}
                exec(compile(z.read(member).decode(), member, "exec"), namespace)
                if not isinstance(namespace.get("points"), (int, float)):
                    raise SystemExit(f"{zip_path.name}: {member} has no numeric `points`")
                points[namespace.get("name", Path(member).stem)] = namespace["points"]
    return points


def max_points(zip_path: Path) -> float:
    """Total points of an autograder."""
    return sum(points_by_question(zip_path).values())


def _read_submission(path: Path, name: str):
    """(notebook, None) if ``path`` can be graded as a submission of ``name``, else
    (None, the reason it cannot)."""
    import nbformat

    if path.suffix != ".ipynb":
        return None, f"not a notebook: {path.name} does not end in .ipynb"
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as e:  # JSON or schema errors: the message says where
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, f"malformed notebook ({type(e).__name__}: {first})"
    found = nb.metadata.get("otter", {}).get("assignment_name")
    if found is None:
        # Colab drops notebook metadata it does not know, otter's included; the setup cell
        # (the first code cell) names the assignment too.
        setup = next((c.source for c in nb.cells if c.cell_type == "code"), "")
        named = re.search(r'^ASSIGNMENT = "([^"]+)"', setup, re.M)
        if named is None:
            return None, (f"not a notebook of {name}: neither otter's metadata nor its setup cell names "
                          f"the assignment (hand in the notebook you were given, not a new one)")
        found = named.group(1)
        nb.metadata["otter"] = {"assignment_name": found}
    if found != name:
        return None, f"not a notebook of {name}: it is a notebook of {found!r}"
    return nb, None


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and everything it started (the Jupyter kernel runs in its own session)."""
    import psutil

    try:
        parent = psutil.Process(proc.pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _score(results_json: Path) -> tuple[float, float]:
    """(points, max points) from otter's results.json (Gradescope's format)."""
    tests = json.loads(results_json.read_text())["tests"]
    scored = [t for t in tests if "score" in t]
    return sum(t["score"] for t in scored), sum(t["max_score"] for t in scored)


def grade_one(path: Path, name: str, zip_path: Path, timeout_s: float, results: Path) -> dict:
    """Grade one submission in its own process; returns its row of scores.csv."""
    import nbformat

    row = {"submission": path.name, "points": 0, "max_points": max_points(zip_path), "reason": ""}
    nb, problem = _read_submission(path, name)
    if problem:
        row["reason"] = problem
        return row
    # Whatever Jupyter the student used (its kernel may have another name), grade with this
    # environment's Python kernel.
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    log_path = results / f"{path.name}.log"
    with tempfile.TemporaryDirectory(prefix="grade-") as work:
        work = Path(work)
        nbformat.write(nb, work / f"{name}.ipynb")
        out = work / "out"
        out.mkdir()
        cmd = [sys.executable, "-m", "otter", "run", "--no-logo", "-a", str(zip_path), "-o", str(out),
               str(work / f"{name}.ipynb")]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
                row["reason"] = f"time limit exceeded: grading took longer than {timeout_s:g} s"
                return row
        result = out / "results.json"
        if proc.returncode != 0 or not result.is_file():
            lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
            last = lines[-1].strip() if lines else "no output"
            row["reason"] = f"grading failed (exit code {proc.returncode}): {last[:300]}"
            return row
        shutil.copy(result, results / f"{path.name}.json")
        points, reported_max = _score(result)
    row["points"] = points
    if reported_max != row["max_points"]:
        row["reason"] = f"otter reported {reported_max:g} points in all, the autograder has {row['max_points']:g}"
    return row


def _grade_and_report(path: Path, name: str, zip_path: Path, timeout_s: float, results: Path) -> dict:
    start = time.monotonic()
    try:
        row = grade_one(path, name, zip_path, timeout_s, results)
    except Exception as e:  # a bug of ours or a broken result file: report, go on
        row = {"submission": path.name, "points": 0, "max_points": max_points(zip_path),
               "reason": f"grader error ({type(e).__name__}: {e})"}
    note = f" ({row['reason']})" if row["reason"] else ""
    print(f"{path.name}: {row['points']:g} / {row['max_points']:g} in "
          f"{time.monotonic() - start:.1f} s{note}", flush=True)
    return row


def grade(name: str, submissions: Path, timeout_s: float, out: Path, jobs: int = 1) -> Path:
    """Grade every file in ``submissions`` (not its subfolders), ``jobs`` at a time, and
    write scores.csv there (rows in file-name order)."""
    if not submissions.is_dir():
        raise SystemExit(f"SUBMISSIONS must be a folder of notebooks; {submissions} is not a folder")
    built = out / name
    master = MASTERS / name / f"{name}.ipynb"
    stale = not (built / "autograder").is_dir() or \
        master.stat().st_mtime > autograder_zip(built).stat().st_mtime
    if stale:
        print(f"building {name} (otter assign) ...", flush=True)
        build(name, out)
    zip_path = autograder_zip(built)
    results = submissions / "results"
    results.mkdir(exist_ok=True)
    # Hidden files (.DS_Store, editors' backups) are nobody's submission.
    files = sorted(p for p in submissions.iterdir()
                   if p.is_file() and p.name != "scores.csv" and not p.name.startswith("."))
    # Each submission is graded by its own `otter run` process; threads only wait for them.
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(lambda p: _grade_and_report(p, name, zip_path, timeout_s, results), files))
    scores = submissions / "scores.csv"
    with open(scores, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SCORES_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "points": f"{row['points']:g}", "max_points": f"{row['max_points']:g}"})
    print(f"wrote {scores} ({len(rows)} submissions)")
    return scores


# --- a demonstration class ----------------------------------------------------------------
DEMO_CLASS = {
    "alice.ipynb": "the solution",
    "bob.ipynb": "the solution with the first question left unanswered, from a Jupyter whose kernel has another name",
    "carol.ipynb": "the notebook as handed out, nothing answered, downloaded from Colab (no otter metadata)",
    "dave.ipynb": "an infinite loop after the setup cell",
    "erin.ipynb": "a truncated file that is not valid JSON",
    "frank.txt": "not a notebook",
    "grace.ipynb": "a cell that kills the Python process",
    "heidi.ipynb": "a notebook of another assignment",
}


def demo_class(name: str, built: Path, dest: Path, pid_file: Path | None = None) -> Path:
    """Write a folder of made-up submissions of ``name`` that takes every path of `grade`
    (see ``DEMO_CLASS``; plus a hidden ``.DS_Store``, which gets no row). ``pid_file``:
    the looping submission writes its process id there (tests use it to check that the
    time limit really ends the process)."""
    import nbformat
    from nbformat.v4 import new_code_cell

    solution = nbformat.read(built / "autograder" / f"{name}.ipynb", as_version=4)
    student = nbformat.read(built / "student" / f"{name}.ipynb", as_version=4)
    dest.mkdir(parents=True, exist_ok=True)

    def write(filename, nb):
        nbformat.write(nb, dest / filename)

    def with_cell(nb, source):
        nb = nbformat.from_dict(json.loads(json.dumps(nb)))
        first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(first_code + 1, new_code_cell(source, id="demo"))
        return nb

    write("alice.ipynb", solution)
    partial = nbformat.from_dict(json.loads(json.dumps(solution)))
    first_answer = next(i for i, c in enumerate(student.cells) if "otter_answer_cell" in c.metadata.get("tags", []))
    partial.cells[first_answer] = student.cells[first_answer]
    partial.metadata["kernelspec"] = {"name": "conda-env-course-py", "display_name": "Python [conda env:course]",
                                      "language": "python"}
    write("bob.ipynb", partial)
    from_colab = nbformat.from_dict(json.loads(json.dumps(student)))
    from_colab.metadata = nbformat.from_dict({"colab": {"provenance": []},
                                              "kernelspec": {"display_name": "Python 3", "name": "python3"},
                                              "language_info": {"name": "python"}})
    write("carol.ipynb", from_colab)
    loop = "import os, pathlib\n"
    if pid_file is not None:
        loop += f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
    write("dave.ipynb", with_cell(student, loop + "while True:\n    pass"))
    (dest / "erin.ipynb").write_text((dest / "carol.ipynb").read_text()[:200])
    (dest / "frank.txt").write_text("My answers are in the notebook I forgot to attach.\n")
    write("grace.ipynb", with_cell(student, "import os\nos._exit(1)"))
    other = nbformat.from_dict(json.loads(json.dumps(student)))
    other.metadata["otter"]["assignment_name"] = "another_assignment"
    write("heidi.ipynb", other)
    # What a folder unzipped on a Mac also holds: not a submission, so not a row.
    (dest / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    return dest


# --- grading environment -------------------------------------------------------------------
def _purelib(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()


def link_venv(grade_venv: Path, book_venv: Path) -> Path:
    """Let ``grade_venv`` import the book venv's packages (after its own) via a .pth file."""
    target = Path(_purelib(grade_venv / "bin" / "python")) / "book_venv.pth"
    book_site = _purelib(book_venv / "bin" / "python")
    target.write_text(f"import site; site.addsitedir({book_site!r})\n")
    return target


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="otter assign each master notebook")
    b.add_argument("names", nargs="*", help="assignments to build (default: all)")
    b.add_argument("--out", type=Path, default=BUILD)
    b.add_argument("--no-run-tests", action="store_true", help="skip otter's run of the solution")
    b.add_argument("--book", action="store_true", help="also copy each student folder to book/assignments/")
    b.add_argument("--jobs", type=int, default=1, help="assignments built at the same time")
    g = sub.add_parser("grade", help="grade a folder of submissions with otter run")
    g.add_argument("name")
    g.add_argument("submissions", type=Path)
    g.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds per submission (default {DEFAULT_TIMEOUT_S})")
    g.add_argument("--out", type=Path, default=BUILD, help="where the built assignments are")
    g.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time")
    d = sub.add_parser("demo-class", help="write made-up submissions that take every path of grade")
    d.add_argument("name")
    d.add_argument("dest", type=Path)
    d.add_argument("--out", type=Path, default=BUILD, help="where the built assignments are")
    d.add_argument("--pid-file", type=Path, default=None)
    v = sub.add_parser("link-venv", help="make the grading venv see the book venv's packages")
    v.add_argument("grade_venv", type=Path)
    v.add_argument("book_venv", type=Path)
    args = parser.parse_args(argv)

    if args.command == "build":
        names = [_check_name(n) for n in args.names or assignment_names()]

        def build_one(name):
            start = time.monotonic()
            built = build(name, args.out, run_tests=not args.no_run_tests)
            if args.book:
                publish(name, built)
            print(f"{name}: {built} ({time.monotonic() - start:.1f} s)", flush=True)

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(build_one, names))
    elif args.command == "grade":
        if args.timeout <= 0:
            raise SystemExit(f"--timeout must be positive, got {args.timeout}")
        if args.jobs < 1:
            raise SystemExit(f"--jobs must be at least 1, got {args.jobs}")
        grade(_check_name(args.name), args.submissions, args.timeout, args.out, args.jobs)
    elif args.command == "demo-class":
        name = _check_name(args.name)
        if not (args.out / name / "autograder").is_dir():
            build(name, args.out)
        dest = demo_class(name, args.out / name, args.dest, args.pid_file)
        for filename, what in DEMO_CLASS.items():
            print(f"{dest / filename}: {what}")
    else:
        print(link_venv(args.grade_venv, args.book_venv))


if __name__ == "__main__":
    main()
