"""Build and grade the course assignments (otter-grader 7 masters, a sandboxed grader).

Usage (the Makefile's `assignments` and `grade` targets call these; run it with the
grading environment's Python, .venv-grade/bin/python):

    python scripts/assignments.py build [NAME ...] [--out DIR] [--seed N] [--no-run-tests] [--book] [--jobs N]
    python scripts/assignments.py grade NAME SUBMISSIONS_DIR [--timeout SECONDS] [--out DIR] [--jobs N]
    python scripts/assignments.py demo-class NAME DEST [--out DIR]
    python scripts/assignments.py attack-class NAME DEST [--out DIR]
    python scripts/assignments.py check-sandbox
    python scripts/assignments.py link-venv GRADE_VENV BOOK_VENV

``build`` runs ``otter assign`` on ``assignments/<name>/<name>.ipynb`` (the master) and
writes ``<out>/<name>/student/`` (the notebook to hand out and its public tests) and
``<out>/<name>/autograder/``: the solution notebook, every test, ``grader/`` (the payload
the grader reads: the reference notebook's cells, the handout's code, each question's
solution and tests, the seed of the hidden inputs, and a pinned copy of minigrad) and
``<name>-gradescope.zip`` (the same grader for Gradescope, with a minigrad wheel written
from this checkout). ``--seed`` draws the hidden inputs
(default: a fresh random seed, written to ``grader/payload.json``). Unless
``--no-run-tests``, the solution is then graded in the sandbox and must score full marks.
``--book`` copies the student folder to ``book/assignments/<name>/``.

``grade`` first runs the reference solution in a sandbox of its own (its answers are the
expected ones), then grades every file of SUBMISSIONS_DIR (hidden files aside): each
notebook in a bubblewrap sandbox of its own, loaded once, each test in a process forked
from it that hands back its answers as data, judged here (``grading/driver.py``,
``grading/runner.py``, ``minigrad/testing.py``), and writes SUBMISSIONS_DIR/scores.csv (``submission,points,max_points,reason``; ``reason`` says
why whenever the score is 0), ``feedback/<file>.txt`` (every test and its message: what to
send back to the student) and ``results/<file>.json`` / ``.log`` (Gradescope-format results
and what the submission printed, for the instructor). ``--timeout`` is the limit of one
test (and of one notebook cell), so that a hang costs only the test it hangs.

``demo-class`` writes a folder of made-up submissions (correct, partial, subtly wrong,
hanging, tampering, sabotaging, a victim graded after the saboteur, and the unreadable
kinds); ``attack-class`` the attacks of a hostile class (``ATTACK_CLASS``); ``check-sandbox`` says whether bubblewrap works here. ``link-venv`` makes the
grading environment see the book's through a ``.pth`` file.
"""
from __future__ import annotations

import argparse
import compileall
import csv
import json
import os
import re
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MASTERS = ROOT / "assignments"
GRADING = MASTERS / "grading"
BUILD = ROOT / "_build" / "assignments"
BOOK = ROOT / "book" / "assignments"
SCORES_COLUMNS = ["submission", "points", "max_points", "reason"]
DEFAULT_TIMEOUT_S = 60
MEMORY_LIMIT_BYTES = int(os.environ.get("GRADER_MEMORY_LIMIT_BYTES", 16 << 30))

sys.path.insert(0, str(MASTERS))
from grading import driver, probes


def assignment_names() -> list[str]:
    """Every assignment: a folder of assignments/ holding a master notebook of its name."""
    return sorted(p.parent.name for p in MASTERS.glob("*/*.ipynb") if p.stem == p.parent.name)


def _check_name(name: str) -> str:
    names = assignment_names()
    if name not in names:
        raise SystemExit(f"unknown assignment {name!r}; the assignments are: {', '.join(names)}")
    return name


# --- build -----------------------------------------------------------------------------
def build(name: str, out: Path, run_tests: bool = True, seed: int | None = None) -> Path:
    """``otter assign`` the master of ``name`` into ``out/name`` (replaced), write its grader
    and Gradescope zip; returns that folder."""
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    master_path = MASTERS / name / f"{name}.ipynb"
    # otter's own run of the tests is replaced by grading the solution in the sandbox below:
    # hidden tests take the build's seed and the reference, which otter does not provide.
    cmd = [sys.executable, "-m", "otter", "assign", "--no-run-tests", str(master_path), str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"otter assign failed for {name}:\n{proc.stdout}\n{proc.stderr}")
    for notebook in (dest / "student" / f"{name}.ipynb", dest / "autograder" / f"{name}.ipynb"):
        _finish_notebook(notebook)
    check_no_leaks(name, dest)
    # otter's zip lists otter alone in its environment (no minigrad, no NumPy): not ours.
    for stale in (dest / "autograder").glob("*-autograder_*.zip"):
        stale.unlink()
    write_grader(name, dest, secrets.randbits(32) if seed is None else seed)
    write_gradescope_zip(name, dest)
    if run_tests:
        check_solution(name, dest)
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


def minigrad_version() -> str:
    """The version students and the grader pin: pyproject's version and, in a git
    checkout, the commit (what the setup cell installs)."""
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.MULTILINE).group(1)


def write_grader(name: str, built: Path, seed: int) -> Path:
    """``built/autograder/grader/``: payload.json (the reference notebook's cells, the
    handed-out code, each question's solution, graded names and tests, the seed) and lib/
    (the grading package and a copy of minigrad, the only code the sandbox can import
    besides the Python environment)."""
    import nbformat

    master = json.loads((MASTERS / name / f"{name}.ipynb").read_text())
    solution = nbformat.read(built / "autograder" / f"{name}.ipynb", as_version=4)
    parts = probes.master_parts(master)
    questions = {q: parts["questions"][q] for q in parts["order"]}
    payload = {"assignment": name, "seed": seed, "minigrad": minigrad_version(),
               "reference": driver.export_cells(solution), "given": parts["given"],
               "solutions": parts["solutions"], "questions": questions}
    grader = built / "autograder" / "grader"
    lib = grader / "lib"
    lib.mkdir(parents=True)
    (grader / "payload.json").write_text(json.dumps(payload, indent=1))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "minigrad", lib / "minigrad", ignore=ignore)
    shutil.copytree(GRADING, lib / "grading", ignore=ignore)
    # compiled once here: the sandbox may not write, so each runner would compile them again
    compileall.compile_dir(lib, quiet=1)
    return grader


# --- Gradescope ------------------------------------------------------------------------
# Gradescope's base images this zip is for: Ubuntu 22.04 (Python 3.10) and 24.04 (Python
# 3.12), and any Debian or Ubuntu with Python >= 3.10. setup.sh makes a virtual environment
# from the image's own python3 (Ubuntu 24.04's pip refuses to install into the system) and
# installs NumPy (the newest 2.x the image's Python takes) and minigrad's wheel: nothing
# else, otter included, is needed to grade.
GRADESCOPE_REQUIREMENTS = """\
# What the autograder needs (installed by setup.sh into /autograder/venv; minigrad from the
# wheel beside it). numpy 2.x: 2.2 on Python 3.10, the newest on 3.11 and later.
numpy>=2.0,<3
{extra}"""
GRADESCOPE_SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the image (one container per submission).
set -euo pipefail
cd /autograder/source
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
fi
python3 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --quiet --upgrade pip
/autograder/venv/bin/python -m pip install --quiet -r requirements.txt {index}
/autograder/venv/bin/python -m pip install --quiet --no-index --find-links wheels minigrad=={version}
chmod -R a+rX /autograder/venv /autograder/source/grader/lib
"""
GRADESCOPE_RUN = """\
#!/usr/bin/env bash
# Gradescope runs this as root for each submission: /autograder/submission holds the notebook.
cd /autograder/source && exec /autograder/venv/bin/python grader/lib/grading/gradescope.py \\
    /autograder/submission /autograder/results/results.json
"""


_WHEEL_LOCK = threading.Lock()


def minigrad_wheel() -> Path:
    """The wheel of minigrad, written once per run (``--jobs``: one thread writes it)."""
    with _WHEEL_LOCK:
        return _minigrad_wheel()


@lru_cache(maxsize=1)
def _minigrad_wheel() -> Path:
    """A wheel of minigrad from this checkout (``_build/wheels/``), written directly: a
    pure-Python wheel is a zip with three metadata files, so no build backend, ``wheel``
    package or network is needed (an instructor's fresh clone has none of them)."""
    import base64
    import hashlib

    version = minigrad_version()
    meta = ROOT / "pyproject.toml"
    requires_python = re.search(r'^requires-python = "([^"]+)"', meta.read_text(), re.M).group(1)
    deps = re.findall(r'"([^"]+)"', re.search(r"^dependencies = \[([^\]]*)\]", meta.read_text(), re.M).group(1))
    dest = ROOT / "_build" / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("minigrad-*.whl"):
        old.unlink()
    path = dest / f"minigrad-{version}-py3-none-any.whl"
    info = f"minigrad-{version}.dist-info"
    files = {}
    for src in sorted((ROOT / "minigrad").rglob("*.py")):
        files[src.relative_to(ROOT).as_posix()] = src.read_bytes()
    files[f"{info}/METADATA"] = ("Metadata-Version: 2.1\nName: minigrad\nVersion: " + version +
                                 f"\nRequires-Python: {requires_python}\n" +
                                 "".join(f"Requires-Dist: {d}\n" for d in deps)).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: scripts/assignments.py\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return path


def write_gradescope_zip(name: str, built: Path) -> Path:
    """``built/autograder/<name>-gradescope.zip``: setup.sh, run_autograder,
    requirements.txt, the minigrad wheel and the grader (the tests run exactly as under
    ``make grade``; Gradescope's container, one per submission, holds the runner, which
    runs as ``nobody``: see grading/gradescope.py)."""
    needs_torch = "import torch" in (MASTERS / name / f"{name}.ipynb").read_text()
    extra = "torch>=2.3  # CPU wheels, from PyTorch's index (setup.sh)\n" if needs_torch else ""
    index = "--extra-index-url https://download.pytorch.org/whl/cpu" if needs_torch else ""
    wheel = minigrad_wheel()
    zpath = built / "autograder" / f"{name}-gradescope.zip"
    grader = built / "autograder" / "grader"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arcname, text, mode=0o644):
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)

        add("setup.sh", GRADESCOPE_SETUP.format(version=minigrad_version(), index=index), 0o755)
        add("run_autograder", GRADESCOPE_RUN, 0o755)
        add("requirements.txt", GRADESCOPE_REQUIREMENTS.format(extra=extra))
        add(f"wheels/{wheel.name}", wheel.read_bytes())
        add("grader/payload.json", (grader / "payload.json").read_text(), 0o600)
        for path in sorted((grader / "lib" / "grading").rglob("*.py")):
            add(f"grader/lib/grading/{path.name}", path.read_text())
    return zpath


def autograder_zip(built: Path) -> Path:
    """The Gradescope autograder zip of a built assignment."""
    zips = sorted((built / "autograder").glob("*-gradescope.zip"))
    if not zips:
        raise SystemExit(f"no autograder zip in {built / 'autograder'}: run `make assignments` first")
    return zips[-1]


# --- the sandbox -----------------------------------------------------------------------
BWRAP_MISSING = ("make grade: bubblewrap (bwrap) is not installed and this user cannot install it: "
                 "run `apt-get install bubblewrap` as root (or grade on Gradescope, see the instructor page)")


@lru_cache(maxsize=1)
def _python_binds() -> tuple[str, ...]:
    """The folders the grading Python needs (its prefix and every sys.path entry), read-only.
    The repository itself is not among them (it holds the masters)."""
    proc = subprocess.run([sys.executable, "-I", "-c",
                           "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix] + sys.path))"],
                          capture_output=True, text=True, check=True)
    paths = []
    for p in json.loads(proc.stdout):
        path = Path(p)
        if not p or not path.exists() or str(path).startswith("/usr/"):
            continue
        if path == ROOT or (ROOT in path.parents and not any(part.startswith(".venv") for part in path.parts)):
            continue
        paths.append(path)
    keep = sorted({str(p) for p in paths if not any(q in p.parents for q in paths)})
    return tuple(keep)


SANDBOX_TMPFS_BYTES = 64 << 20  # /tmp and /scratch each: RAM the notebook may fill


SANDBOX_UIDS = range(64100, 64164)  # root's sandboxes: a host user of its own each, one per job
PROCESS_LIMIT = int(os.environ.get("GRADER_PROCESS_LIMIT", 256))
_UIDS_IN_USE: set[int] = set()
_UIDS_LOCK = threading.Lock()


def tasks_of(uid: int) -> int:
    """Processes and threads of ``uid`` on this machine now (what RLIMIT_NPROC counts)."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return n


def root_mode() -> bool:
    """Whether sandboxes start as root (who then gives each a host user of its own)."""
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


class sandbox_user:
    """The host user one sandbox runs as, held while it runs (a context manager).

    The kernel applies no process limit (RLIMIT_NPROC) to root, and counts it per user. So
    run by root, each sandbox gets a user of its own (``SANDBOX_UIDS``, no process of it
    alive), which no other submission shares: a bomb in one cannot starve another. Run by
    anyone else, every sandbox is that user's (the limit is shared by the jobs running at
    once)."""

    def __enter__(self) -> int:
        if not root_mode():
            self.uid = None
            return os.getuid()
        with _UIDS_LOCK:
            for uid in SANDBOX_UIDS:
                if uid not in _UIDS_IN_USE and tasks_of(uid) == 0:
                    _UIDS_IN_USE.add(uid)
                    self.uid = uid
                    return uid
        raise RuntimeError(f"no free sandbox user in {SANDBOX_UIDS.start}-{SANDBOX_UIDS.stop - 1}")

    def __exit__(self, *exc):
        if self.uid is not None:
            with _UIDS_LOCK:
                _UIDS_IN_USE.discard(self.uid)


def sandbox_command(lib: Path, uid: int | None = None) -> list[str]:
    """bubblewrap: new PID, network, IPC and UTS namespaces (no network, no other process
    visible), the system and the Python environment read-only, the grader's lib read-only
    at /grader/lib, and two small private tmpfs (/tmp, /scratch) as the only writable
    places: nothing of the host's disk, no other submission, no result file.

    Run by an ordinary user, a new user namespace maps it to ``nobody`` inside. Run by root
    (``root_mode``), bubblewrap mounts as root and ``setpriv`` then drops the runner, with
    every capability, to ``uid`` (a host user of its own: see ``sandbox_user``), before
    Python starts."""
    size = str(SANDBOX_TMPFS_BYTES)
    as_root = root_mode() and uid is not None and uid != 0
    if as_root:
        cmd = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
               "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        cmd = ["bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534"]
    cmd += ["--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/scratch",
            "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "OPENBLAS_NUM_THREADS", "1",
            "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "MPLBACKEND", "Agg",
            "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "LANG", "C.UTF-8",
            "--setenv", "GRADER_OWN_PID_NAMESPACE", "1",
            "--ro-bind", "/usr", "/usr"]
    for d in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(d):
            cmd += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
    for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group"):
        cmd += ["--ro-bind-try", f, f]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp"]
    binds = _python_binds()
    if as_root:  # bubblewrap run by root makes the folders above a bind 0700: open them
        above = {str(a) for b in (*binds, "/grader/lib") for a in Path(b).parents if str(a) != "/"}
        for a in sorted(above - set(binds), key=lambda a: a.count("/")):
            cmd += ["--perms", "0755", "--dir", a]
    for p in binds:
        cmd += ["--ro-bind", p, p]
    cmd += ["--ro-bind", str(lib), "/grader/lib", "--size", size, "--tmpfs", "/scratch"]
    if as_root:  # the tmpfs are root's: open them to the runner's user
        cmd += ["--chmod", "1777", "/tmp", "--chmod", "1777", "/scratch", "--chdir", "/scratch",
                "setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all"]
    else:
        cmd += ["--chdir", "/scratch"]
    return cmd + [sys.executable, "-I", "/grader/lib/grading/runner.py"]


def sandbox_limits(uid: int):
    """The ``preexec_fn`` of a runner's bubblewrap: memory, file size, no core dumps, and at
    most ``PROCESS_LIMIT`` more processes and threads than ``uid`` (the user the runner
    will be) has now: a fork or thread bomb stops there."""
    nproc = tasks_of(uid) + PROCESS_LIMIT

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return limits


def check_sandbox() -> str | None:
    """None if bubblewrap runs here, else one line saying why not."""
    if shutil.which("bwrap") is None:
        return BWRAP_MISSING
    proc = subprocess.run(["bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/usr", "/usr",
                           "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                           "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
                           "/usr/bin/true"], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"make grade: bubblewrap cannot create a sandbox here: {proc.stderr.strip()[:200]}"
    return None


# --- grade -----------------------------------------------------------------------------
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
        named = re.search(r'^ASSIGNMENT = "([^"]+)"', setup, re.MULTILINE)
        if named is None:
            return None, (f"not a notebook of {name}: neither otter's metadata nor its setup cell names "
                          f"the assignment (hand in the notebook you were given, not a new one)")
        found = named.group(1)
    if found != name:
        return None, f"not a notebook of {name}: it is a notebook of {found!r}"
    return nb, None


def grade_one(path: Path, name: str, built: Path, timeout_s: float, submissions: Path,
              reference) -> dict:
    """Grade one submission (one sandbox; each test in a process forked in it) against the
    reference's answers (a dict, or a future of one: the reference may still be running
    while the submission runs); returns its row of scores.csv and writes its feedback and
    results."""
    payload = json.loads((built / "autograder" / "grader" / "payload.json").read_text())
    lib = built / "autograder" / "grader" / "lib"
    row = {"submission": path.name, "points": 0, "max_points": driver._max(payload), "reason": ""}
    nb, problem = _read_submission(path, name)
    if problem:
        row["reason"] = problem
        return row
    cells = driver.export_cells(nb)
    start = time.monotonic()
    with sandbox_user() as uid:
        run = driver.run_notebook(lambda: sandbox_command(lib, uid), cells, payload["given"],
                                  driver.plan_tests(payload), timeout_s, preexec=sandbox_limits(uid))
    seconds = round(time.monotonic() - start, 1)  # the submission's own time
    if not isinstance(reference, dict):
        reference = reference.result()
    graded = driver.judge_run(payload, run, reference)
    graded["seconds"] = seconds
    graded["starts"] = run["starts"]
    (submissions / "results" / f"{path.name}.json").write_text(
        json.dumps(dict(driver.gradescope_results(graded), detail=graded), indent=1))
    (submissions / "results" / f"{path.name}.log").write_text(
        "--- what the submission printed while it was graded (the first MiB) ---\n"
        + run["log"].decode(errors="replace"))
    (submissions / "feedback" / f"{path.name}.txt").write_text(driver.feedback_text(name, path.name, graded))
    row["points"], row["max_points"], row["reason"] = graded["points"], graded["max_points"], graded["reason"]
    return row


def reference_answers(name: str, built: Path, timeout_s: float) -> dict:
    """The reference solution's answers to every test, run in a sandbox of its own on this
    machine (the expected values; floating point as this CPU rounds it)."""
    payload = json.loads((built / "autograder" / "grader" / "payload.json").read_text())
    lib = built / "autograder" / "grader" / "lib"
    with sandbox_user() as uid:
        return driver.reference_records(payload, lambda: sandbox_command(lib, uid), timeout_s,
                                        preexec=sandbox_limits(uid))


def _grade_and_report(path: Path, name: str, built: Path, timeout_s: float, submissions: Path,
                      reference) -> dict:
    start = time.monotonic()
    try:
        row = grade_one(path, name, built, timeout_s, submissions, reference)
    except Exception as e:  # a bug of ours or a broken result file: report, go on
        payload = json.loads((built / "autograder" / "grader" / "payload.json").read_text())
        row = {"submission": path.name, "points": 0, "max_points": driver._max(payload),
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
    problem = check_sandbox()
    if problem:
        raise SystemExit(problem)
    built = out / name
    master = MASTERS / name / f"{name}.ipynb"
    payload = built / "autograder" / "grader" / "payload.json"
    if not payload.is_file() or master.stat().st_mtime > payload.stat().st_mtime:
        print(f"building {name} (otter assign) ...", flush=True)
        build(name, out)
    for sub in ("results", "feedback"):
        (submissions / sub).mkdir(exist_ok=True)
    # Hidden files (.DS_Store, editors' backups) are nobody's submission.
    files = sorted(p for p in submissions.iterdir()
                   if p.is_file() and p.name != "scores.csv" and not p.name.startswith("."))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        # the reference's run takes the first place in the pool; each submission runs
        # meanwhile and waits for the reference's answers only to be judged
        reference = pool.submit(reference_answers, name, built, timeout_s)
        rows = list(pool.map(lambda p: _grade_and_report(p, name, built, timeout_s, submissions, reference),
                             files))
        try:
            reference.result()  # an error of the reference's run stops the grading here
        except driver.Unguarded as e:  # fail closed: no scores where the guard is incomplete
            raise SystemExit(f"{name}: {e}") from None
    scores = submissions / "scores.csv"
    with open(scores, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SCORES_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "points": f"{row['points']:g}", "max_points": f"{row['max_points']:g}"})
    print(f"wrote {scores} ({len(rows)} submissions)")
    return scores


def check_solution(name: str, built: Path) -> None:
    """Grade the solution notebook in the sandbox: it must score full marks."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for sub in ("results", "feedback"):
            (folder / sub).mkdir()
        shutil.copy(built / "autograder" / f"{name}.ipynb", folder / "solution.ipynb")
        reference = reference_answers(name, built, DEFAULT_TIMEOUT_S)
        row = grade_one(folder / "solution.ipynb", name, built, DEFAULT_TIMEOUT_S, folder, reference)
        if row["points"] != row["max_points"]:
            raise SystemExit(f"{name}: the solution scores {row['points']:g} / {row['max_points']:g} "
                             f"({row['reason']}):\n{(folder / 'feedback' / 'solution.ipynb.txt').read_text()}")


# --- a demonstration class ----------------------------------------------------------------
DEMO_CLASS = {
    "alice.ipynb": "the solution (correct)",
    "bob.ipynb": "the solution with the first question left unanswered (partial), from a Jupyter "
                 "whose kernel has another name",
    "carol.ipynb": "the notebook as handed out, nothing answered, downloaded from Colab (no otter metadata)",
    "dave.ipynb": "the solution with one function that hangs on inputs only a hidden test gives (hanging)",
    "erin.ipynb": "a truncated file that is not valid JSON",
    "frank.txt": "not a notebook",
    "grace.ipynb": "nothing answered, and a cell that kills the Python process",
    "heidi.ipynb": "a notebook of another assignment",
    "ivan.ipynb": "the solution with one answer subtly wrong: it passes the public tests (subtly wrong)",
    "mallory.ipynb": "nothing answered, and a cell that replaces otter's test runner, minigrad's ledger "
                     "and the notebook's helpers (tampering)",
    "sybil.ipynb": "the solution, and a cell that hunts for other submissions, the autograder and the "
                   "hidden tests, overwrites what it finds and erases itself (sabotaging)",
    "victor.ipynb": "the solution, graded after sybil (the victim)",
}

# For each assignment: (name defined by the cell to replace, replacement) for ivan (subtly
# wrong) and dave (hangs on what only hidden tests give).
DEMO_VARIANTS = {
    "a1_backward": {
        "subtle": ("Tanh", '''class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.tanh(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (1 - np.tanh(x) ** 2)
'''),
        "hang": ("MatMul", '''class MatMul(Function):
    @staticmethod
    def forward(ctx, x, w):
        while x.shape[1] == 1:
            pass
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.T, x.T @ grad
'''),
    },
    "a3_checkpoint": {
        "subtle": ("predicted_peak", '''def predicted_peak(n, starts, act_bytes):
    # the end of the forward pass only: the recomputation is forgotten
    return act_bytes * ((len(starts) - 1) + (n - starts[-1] + 1))
'''),
        "hang": ("my_checkpoint_sequential", '''def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    while len(starts) > 3:
        pass
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = Checkpoint.apply(h, lambda t, a=a, b=b: run_plain(layers[a:b], t))
    return run_plain(layers[bounds[-2]:], h)
'''),
    },
    "a4_planning": {
        "subtle": ("optimal_plan", '''def optimal_plan(a, m, c, budget):
    if len(m) <= 12:
        return brute_force_plan(a, m, c, budget)
    return (0, [0])
'''),
        "hang": ("segment_peak", '''def segment_peak(a, m, starts):
    n = len(m)
    while n > 9:
        pass
    bounds = list(starts) + [n]
    held, terms = 0, []
    for j in range(len(starts) - 1):
        terms.append(held + a[bounds[j]] + sum(m[bounds[j]:bounds[j + 1]]))
        held += a[bounds[j]]
    terms.append(held + a[bounds[-2]] + sum(m[bounds[-2]:n]))
    return max(terms)
'''),
    },

    "a6_nested": {
        "subtle": ("nested_peak", '''def nested_peak(a, items, held=frozenset()):
    # each level on its own: what the outer levels hold is forgotten
    current, peaks = set(), []
    for item in items:
        if item[0] == "taped":
            current |= {item[1], item[1] + 1}
        else:
            _, s, t, inner = item
            peaks.append(nested_peak(a, inner) + a[s])
            current |= {s}
    return max([sum(a[i] for i in current)] + peaks)
'''),
        "hang": ("run_nested", '''def run_nested(layers, items, x, depth=0):
    while depth > 2:
        pass
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        else:
            _, s, t, inner = item
            h = checkpoint(lambda u, inner=inner: run_nested(layers, inner, u, depth + 1), h, use_reentrant=True)
    return h
'''),
    },
    "a7_hooks": {
        "subtle": ("hook_checkpoint", '''def hook_checkpoint(fn, x):
    rng_state = minigrad.random.get_rng_state()
    rebuilt = []
    handles = itertools.count()

    def collect(array):
        rebuilt.append(array)
        return len(rebuilt) - 1

    def unpack(k):
        if not rebuilt:
            minigrad.random.set_rng_state(rng_state)   # replayed, but never put back
            with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                fn(Tensor(x.data, requires_grad=True))
        return rebuilt[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
        "hang": ("hook_checkpoint_sequential", '''def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    while len(starts) > 3:
        pass
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = hook_checkpoint(lambda t, a=a, b=b: run_plain(layers[a:b], t), h)
    return run_plain(layers[bounds[-2]:], h)
'''),
    },}

TAMPER_CELL = '''# Pass every test with nothing answered: replace minigrad's ledger, the notebook's
# helpers and otter's test runner (the seven lines that gave full marks under otter run).
import minigrad.memory
minigrad.memory.track = lambda *a, **k: __import__("contextlib").nullcontext()
gradients = lambda *a, **k: ([], None)
import otter.test_files.exception_test as et
def run(self, global_environment):
    for tc in self.test_cases:
        self.test_case_results.append(et.TestCaseResult(test_case=tc, message="ok", passed=True))
et.ExceptionTestFile.run = run
'''

SABOTAGE_CELL = '''# Hunt for other submissions, the autograder and the hidden tests; overwrite and erase.
import os, json
TARGETS = {targets!r}
found = {{"read": {{}}, "overwritten": [], "processes": [], "files": []}}
for path in TARGETS:
    try:
        found["read"][path] = open(path, errors="replace").read()[:2000]
    except OSError as e:
        found["read"][path] = f"{{type(e).__name__}}"
    try:
        with open(path, "w") as f:
            f.write("{{}}")
        found["overwritten"].append(path)
    except OSError:
        pass
print("SABOTAGE REPORT", json.dumps(found), flush=True)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            found["processes"].append(open(f"/proc/{{pid}}/cmdline").read().replace("\\0", " "))
        except OSError:
            pass
SKIP = ("/usr", "/proc", "/sys", "/dev", "/root/.pyenv")
# Absolute paths, each folder once: "..", walked as itself, would enter /usr by "../usr".
for top in sorted({{os.path.abspath(t) for t in ("/", os.path.expanduser("~"), "/tmp", "..")}}):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not os.path.join(root, d).startswith(SKIP) and not d.startswith(".venv")
                   and d not in ("site-packages", "lib-dynload")]
        for f in files:
            if f.endswith((".ipynb", ".zip", ".json", ".py", ".csv")):
                p = os.path.join(root, f)
                found["files"].append(p)
                try:
                    text = open(p, errors="replace").read()
                    if "hidden" in text or "test_case" in text:
                        found["read"][p] = text[:2000]
                    with open(p, "a") as g:
                        g.write(" ")
                    found["overwritten"].append(p)
                except (OSError, ValueError):
                    pass
print("SABOTAGE REPORT", json.dumps(found))
for p in ("student.json", "/scratch/student.json"):
    try:
        os.remove(p)
    except OSError:
        pass
'''


def _replace_definition(nb, name: str, source: str):
    import nbformat

    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    pattern = re.compile(rf"^(def|class) {re.escape(name)}\b", re.MULTILINE)
    for cell in nb.cells:
        if cell.cell_type == "code" and pattern.search(cell.source):
            cell.source = source
            return nb
    raise SystemExit(f"no cell defines {name}")


def demo_class(name: str, built: Path, dest: Path, targets: list[str] | None = None) -> Path:
    """Write a folder of made-up submissions of ``name`` that takes every path of `grade`
    (see ``DEMO_CLASS``; plus a hidden ``.DS_Store``, which gets no row). ``targets``: files
    the saboteur tries to read and overwrite (default: the victim, the other submissions,
    the payload and the autograder zip, by their real paths)."""
    import nbformat
    from nbformat.v4 import new_code_cell

    solution = nbformat.read(built / "autograder" / f"{name}.ipynb", as_version=4)
    student = nbformat.read(built / "student" / f"{name}.ipynb", as_version=4)
    dest.mkdir(parents=True, exist_ok=True)

    def write(filename, nb):
        nbformat.write(nb, dest / filename)

    def copy(nb):
        return nbformat.from_dict(json.loads(json.dumps(nb)))

    def with_cell(nb, source, at_end=False):
        nb = copy(nb)
        first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(len(nb.cells) if at_end else first_code + 1, new_code_cell(source, id="demo"))
        return nb

    write("alice.ipynb", solution)
    partial = copy(solution)
    first_answer = next(i for i, c in enumerate(student.cells) if "otter_answer_cell" in c.metadata.get("tags", []))
    partial.cells[first_answer] = student.cells[first_answer]
    partial.metadata["kernelspec"] = {"name": "conda-env-course-py", "display_name": "Python [conda env:course]",
                                      "language": "python"}
    write("bob.ipynb", partial)
    from_colab = copy(student)
    from_colab.metadata = nbformat.from_dict({"colab": {"provenance": []},
                                              "kernelspec": {"display_name": "Python 3", "name": "python3"},
                                              "language_info": {"name": "python"}})
    write("carol.ipynb", from_colab)
    variants = DEMO_VARIANTS.get(name, {})
    if "hang" in variants:
        write("dave.ipynb", _replace_definition(solution, *variants["hang"]))
    else:
        write("dave.ipynb", with_cell(solution, "while True:\n    pass", at_end=True))
    (dest / "erin.ipynb").write_text((dest / "carol.ipynb").read_text()[:200])
    (dest / "frank.txt").write_text("My answers are in the notebook I forgot to attach.\n")
    write("grace.ipynb", with_cell(student, "import os\nos._exit(1)"))
    other = copy(student)
    other.metadata["otter"]["assignment_name"] = "another_assignment"
    write("heidi.ipynb", other)
    if "subtle" in variants:
        write("ivan.ipynb", _replace_definition(solution, *variants["subtle"]))
    write("mallory.ipynb", with_cell(student, TAMPER_CELL, at_end=True))
    if targets is None:
        targets = [str((dest / f).resolve()) for f in ("victor.ipynb", "alice.ipynb", "scores.csv")]
        targets += [str((built / "autograder" / "grader" / "payload.json").resolve()),
                    str(autograder_zip(built).resolve()),
                    str((built / "autograder" / "tests" / "q1.py").resolve())]
    write("sybil.ipynb", with_cell(solution, SABOTAGE_CELL.format(targets=targets), at_end=True))
    write("victor.ipynb", solution)
    # What a folder unzipped on a Mac also holds: not a submission, so not a row.
    (dest / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    return dest


# --- an attack class ----------------------------------------------------------------------
# Each a notebook of every assignment, made by `attack-class`: what a hostile class tries.
# None may score more than the notebook as handed out (or it is "tampering detected"); the
# solution with a crash after its answers keeps full marks.
ATTACK_CLASS = {
    "blank.ipynb": "the notebook as handed out (the bar every attack is held to)",
    "forge.ipynb": "nothing answered; every graded name, called, writes forged grader messages "
                   "(loaded, answers, result, done) on every open file descriptor and ends the process",
    "stack.ipynb": "nothing answered; every graded name walks the stack, the heap and the exception "
                   "frames for the reference, the grader's switches and tokens, then tries ctypes and fork",
    "numpy.ipynb": "nothing answered; NumPy's comparisons patched in its internals and minigrad.testing's "
                   "judge replaced, at load",
    "restore.ipynb": "nothing answered; the graded names patch NumPy and minigrad.testing while a test "
                     "runs and put them back before returning",
    "equal.ipynb": "every graded name returns objects that equal everything (float and ndarray subclasses "
                   "and a plain class)",
    "crash.ipynb": "the solution, then a cell that ends the process (os._exit) after the answers",
    "segfault.ipynb": "the solution, then a cell that crashes the interpreter (SIGSEGV)",
    "hang.ipynb": "every graded name hangs when called",
    "flood.ipynb": "the solution, printing 64 MiB without a newline and writing 64 MiB to every fd",
    "results.ipynb": "nothing answered; writes Gradescope's results.json and the payload, directly and "
                     "from a process meant to outlive the grader",
    "disk.ipynb": "the solution, then a cell that writes 64 MiB files to every writable folder until "
                  "refused (2 GiB at most)",
    "spy.ipynb": "nothing answered; observers left registered in minigrad (a ledger tracker, a hook of "
                 "every kind, an instance patch of the ledger) watch the grader's own measurements, and "
                 "every graded name answers with the last peak they saw",
    "planted.ipynb": "nothing answered; objects planted where the grader looks outside the cells (a module "
                     "attribute with a __class__ property, a ledger tracker) try to add an audit hook of "
                     "their own, and every graded name says whether one got in",
    "bomb.ipynb": "nothing answered; every graded name starts processes (through _posixsubprocess, "
                  "which no audit hook sees) and threads until the system refuses, and says how many",
    "selfpatch.ipynb": "the solution, kept only if a module of minigrad or NumPy can be patched for a "
                       "moment (through setattr, del, vars, __dict__, __class__) "
                       "and put back: a patch undone before the fingerprint looks",
    "rawpatch.ipynb": "the solution, kept only if a module of minigrad or NumPy can be patched for a "
                      "moment past its guarded class (through a function's __globals__, "
                      "object.__setattr__, types.ModuleType.__setattr__, the raw __dict__, the guard's "
                      "own module switched off), called and put back, in the cells: a patch that no "
                      "audit event and no fingerprint sees",
    "rawpatch_late.ipynb": "the solution, each graded function making the same momentary patches each "
                           "time a test calls it (and failing when none takes)",
    "leak.ipynb": "nothing answered; every graded name reads what it can of the tests and of the "
                  "earlier questions' reference (their code objects, the process's memory through "
                  "/proc under several names) and raises it as its error message, for the feedback",
}

FORGE_CELL = """import json, os
def _forge(*args, **kwargs):
    lines = [{"kind": "loaded", "cell_errors": []}, {"kind": "done"},
             {"kind": "result", "passed": True, "points": 99, "test": "q1/x"}]
    for name in TESTS:
        lines.append({"kind": "answers", "test": name, "record": {"answers": [], "error": None},
                      "tampered": ""})
        lines.append({"kind": "ended", "test": name, "status": 0})
    data = "".join(json.dumps(m) + "\\n" for m in lines).encode()
    for fd in range(0, 64):
        try:
            os.write(fd, data)
        except OSError:
            pass
    os._exit(0)
for _name in GRADED:
    globals()[_name] = type(_name, (), {"__call__": staticmethod(_forge), "__getattr__": lambda s, k: _forge,
                                         "apply": staticmethod(_forge), "__new__": lambda c, *a, **k: _forge()})
    globals()[_name] = _forge if _name[0].islower() else globals()[_name]
_forge() if FORGE_AT_LOAD else None
"""

STACK_CELL = """import gc, inspect, json, logging, sys, traceback
REPORT = {"frames": [], "found": [], "refused": []}
def _try(what, fn):
    try:
        return fn()
    except BaseException as e:
        REPORT["refused"].append(f"{what}: {type(e).__name__}")
def _hunt(*args, **kwargs):
    frames = []
    for what, get in [("sys._getframe", lambda: sys._getframe(1)),
                      ("inspect.currentframe", lambda: inspect.currentframe()),
                      ("logging.currentframe", lambda: logging.currentframe()),
                      ("traceback.walk_stack", lambda: next(traceback.walk_stack(None))[0]),
                      ("tb_frame", lambda: _tb()),
                      ("gi_frame", lambda: (x for x in [1]).gi_frame)]:
        f = _try(what, get)
        if f is not None:
            frames.append(f)
    for f in frames:
        while f is not None:
            for k, v in list(f.f_locals.items()):
                if k in ("reference", "fixtures", "solutions", "payload", "token", "leave", "trust", "state"):
                    REPORT["found"].append(k)
                    if callable(v) and k == "leave":
                        v()
            f = f.f_back
    objs = _try("gc.get_objects", gc.get_objects) or []
    REPORT["found"] += [type(o).__name__ for o in objs if isinstance(o, dict) and "reference" in o][:3]
    _try("ctypes", lambda: __import__("ctypes").CDLL(None).getpid())
    _try("fork", lambda: __import__("os").fork())
    _try("settrace", lambda: sys.settrace(lambda *a: None))
    print("STACK REPORT", json.dumps(REPORT), flush=True)
    return 0
def _tb():
    try:
        raise ValueError
    except ValueError as e:
        return e.__traceback__.tb_frame
for _name in GRADED:
    globals()[_name] = _hunt
"""

NUMPY_CELL = """import numpy, numpy.testing, minigrad.testing
numpy._core.numeric.allclose = lambda *a, **k: True
numpy._core.numeric.array_equal = lambda *a, **k: True
numpy.testing.assert_allclose = lambda *a, **k: None
minigrad.testing.judge = lambda got, want: ""
minigrad.testing.compare = lambda *a, **k: ""
"""

RESTORE_CELL = """import numpy, minigrad.testing
def _sneak(*args, **kwargs):
    saved = (numpy._core.numeric.array_equal, minigrad.testing.canonical)
    numpy._core.numeric.array_equal = lambda *a, **k: True
    minigrad.testing.canonical = lambda v, *a, **k: saved[1](0)
    try:
        return 0
    finally:
        numpy._core.numeric.array_equal, minigrad.testing.canonical = saved
for _name in GRADED:
    globals()[_name] = _sneak
"""

EQUAL_CELL = """import numpy as np
class _Eq:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __len__(self): return 1
    def __iter__(self): return iter([self])
    def __getattr__(self, k): return self
    def __call__(self, *a, **k): return self
    def __int__(self): return 0
    def __float__(self): return 0.0
    def __array__(self, *a, **k): return np.zeros(1)
class _EqFloat(float):
    def __eq__(self, other): return True
class _EqArray(np.ndarray):
    def __eq__(self, other): return np.ones(np.shape(other), dtype=bool)
def _equal(*args, **kwargs):
    return [_Eq(), _EqFloat(0.0), np.zeros(1).view(_EqArray)][len(args) % 3]
for _name in GRADED:
    globals()[_name] = _equal
"""

LEAK_CELL = """import dis, inspect, io, os, re
def _read_code(obj):
    for how in (lambda: inspect.getsource(obj), lambda: repr(obj.__code__.co_consts),
                lambda: (dis.dis(obj, file=io.StringIO()), "disassembled")[1]):
        try:
            return "GOT " + how()[:200]
        except BaseException as e:
            pass
    return "refused"
def _read_memory(opener):
    try:
        with opener() as mem:
            maps = [ln.split()[0] for ln in open("/proc/self/maps") if " r" in ln]
            found = 0
            for span in maps:
                lo, hi = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(lo)
                    found += len(re.findall(rb"def test_", mem.read(min(hi - lo, 64 << 20))))
                except OSError:
                    pass
            return f"GOT memory ({found} test definitions)"
    except BaseException as e:
        return f"refused ({type(e).__name__})"
def _link():
    path = f"/tmp/leak-{os.getpid()}"
    os.symlink("/proc/self/mem", path)
    return open(path, "rb", 0)
_OPENERS = {"mem": lambda: open("/proc/self/mem", "rb", 0),
            "task": lambda: open(f"/proc/self/task/{os.getpid()}/mem", "rb", 0),
            "parent": lambda: open(f"/proc/{os.getppid()}/mem", "rb", 0),
            "dir_fd": lambda: os.fdopen(os.open("proc/self/mem", os.O_RDONLY,
                                                dir_fd=os.open("/", os.O_RDONLY)), "rb", 0),
            "symlink": _link}
def _leak(*args, **kwargs):
    report = []
    for name in GRADED:
        obj = globals().get(name)
        if obj is None or obj is _leak or getattr(obj, "__module__", "").startswith("grading"):
            continue  # the grader's kit (its refusals) is no secret: it ships with the autograder
        report.append(f"reference {name}: {_read_code(obj)}")
        for k, v in list(vars(obj).items()) if isinstance(obj, type) else []:
            v = getattr(v, "__func__", v)
            if callable(v) and hasattr(v, "__qualname__"):
                report.append(f"reference {name}.{k}: {_read_code(v)}")
    for a in list(args) + list(kwargs.values()):
        if callable(a) and "test_" in getattr(a, "__qualname__", ""):
            report.append(f"test's {a.__qualname__}: {_read_code(a)}")
    for how, opener in _OPENERS.items():
        report.append(f"memory via {how}: {_read_memory(opener)}")
    raise AssertionError("LEAK " + " | ".join(report))
for _name in GRADED:
    globals()[_name] = _leak
"""

DISK_CELL = """import os
_block = b"z" * (64 << 20)
for _i in range(32):
    for _folder in (".", "/tmp", "/var/tmp", "/dev/shm", "/scratch"):
        try:
            with open(os.path.join(_folder, f"fill-{_i}"), "wb") as _f:
                _f.write(_block)
        except OSError:
            pass
"""

SPY_CELL = """import minigrad
from minigrad import hooks, memory
_SEEN = {"peak": 0, "live": 0}
class _Spy:
    def _observe(self, live):
        _SEEN["live"] = live.get("activations", 0)
        _SEEN["peak"] = max(_SEEN["peak"], _SEEN["live"])
    def _event(self, *args):
        pass
memory._LEDGER.trackers.append(_Spy())
hooks.register_hooks(hold=lambda *a: _SEEN.__setitem__("peak", _SEEN["peak"] + 1))
try:
    memory._LEDGER.note = _SEEN
except Exception:
    pass
def _spy(*args, **kwargs):
    return _SEEN["peak"]
for _name in GRADED:
    globals()[_name] = _spy
"""

PLANTED_CELL = """import os, sys, minigrad
from minigrad import memory
_GOT = {"hook": False}
def _hook(event, args):
    _GOT["hook"] = True
def _try():
    try:
        sys.addaudithook(_hook)
    except BaseException:
        pass
class _Evil:
    @property
    def __class__(self):
        _try()
        return object
class _Tracker:
    def _observe(self, live):
        _try()
    def _event(self, *args):
        _try()
# past the module's guard (its class refuses `minigrad._planted = ...`): the raw namespace
__import__("types").ModuleType.__dict__["__dict__"].__get__(minigrad)["_planted"] = _Evil()
memory._LEDGER.trackers.append(_Tracker())
def _planted(*args, **kwargs):
    os.listdir(".")  # an audited event: a hook of the notebook's would hear it
    raise AssertionError(f"PLANTED hook={'in' if _GOT['hook'] else 'out'}")
for _name in GRADED:
    globals()[_name] = _planted
"""

SELFPATCH_CELL = """import types, numpy, minigrad, minigrad.memory
def _ways():
    track = minigrad.memory.track
    yield "setattr", lambda: setattr(minigrad.memory, "track", track)
    yield "vars", lambda: vars(minigrad.memory).__setitem__("track", track)
    yield "dict", lambda: minigrad.memory.__dict__.__setitem__("track", track)
    yield "delattr", lambda: (delattr(minigrad.memory, "track"), setattr(minigrad.memory, "track", track))
    yield "class", lambda: setattr(minigrad, "__class__", types.ModuleType)
    yield "object_class", lambda: object.__setattr__(numpy, "__class__", types.ModuleType)
    yield "numpy", lambda: setattr(numpy, "allclose", numpy.allclose)
_TOOK = []
for _way, _do in _ways():
    try:
        _do()
        _TOOK.append(_way)
    except Exception as _e:
        print(f"SELFPATCH {_way} refused: {type(_e).__name__}")
print(f"SELFPATCH took: {_TOOK}")
if not _TOOK:  # nothing could be patched: the answers go too
    for _name in GRADED:
        globals().pop(_name, None)
"""

RAWPATCH_CELL = """import functools, types, numpy.testing, minigrad.memory
_RAW = types.ModuleType.__dict__["__dict__"].__get__
_MEM, _NPT = minigrad.memory, numpy.testing
# the modules' namespaces, reached now (while a test runs, the grader's library rules may
# have put a function of its own in place of minigrad's)
_MEM_NS, _NPT_NS = _MEM.fmt_bytes.__globals__, _NPT.assert_allclose.__globals__
def _ways():
    fmt, fake = _MEM.fmt_bytes, lambda *a, **k: "0 B"
    compare = _NPT_NS["assert_array_compare"]
    def seen_by_minigrad():
        return _MEM.fmt_bytes(1 << 30) == "0 B"
    def seen_by_numpy():
        try:
            _NPT.assert_allclose(1.0, 2.0)
            return True
        except AssertionError:
            return False
    yield "__globals__", lambda v: _MEM_NS.__setitem__("fmt_bytes", v), fmt, fake, seen_by_minigrad
    yield "numpy __globals__", lambda v: _NPT_NS.__setitem__("assert_array_compare", v), \
        compare, lambda *a, **k: None, seen_by_numpy
    yield "object.__setattr__", lambda v: object.__setattr__(_MEM, "fmt_bytes", v), fmt, fake, seen_by_minigrad
    yield "ModuleType.__setattr__", lambda v: types.ModuleType.__setattr__(_MEM, "fmt_bytes", v), fmt, fake, \
        seen_by_minigrad
    yield "raw __dict__", lambda v: _RAW(_MEM).__setitem__("fmt_bytes", v), fmt, fake, seen_by_minigrad
    guard = type(_MEM).__setattr__.__globals__  # the grader's own module (its runner, as __main__)
    def guard_off(v):  # the guarded class's hook switched off for a moment, then a plain setattr
        saved = guard["_audit"]
        guard["_audit"] = lambda *a: None
        try:
            setattr(_MEM, "fmt_bytes", v)
        finally:
            guard["_audit"] = saved
    yield "guard switched off", guard_off, fmt, fake, seen_by_minigrad
def _sneak():
    took = []
    for way, write, original, fake, seen in _ways():
        try:
            write(fake)  # the patch ...
            try:
                if seen():  # ... a call that goes through it ...
                    took.append(way)
            finally:
                write(original)  # ... and put back before anyone looks
        except Exception as e:
            print(f"RAWPATCH {way} refused: {type(e).__name__}")
    return took
if RAWPATCH_AT_LOAD:
    _TOOK = _sneak()
    print(f"RAWPATCH took: {_TOOK}")
    if not _TOOK:  # nothing could be patched: the answers go too
        for _name in GRADED:
            globals().pop(_name, None)
else:
    def _late(f):
        @functools.wraps(f)
        def late(*args, **kwargs):
            took = _sneak()
            print(f"RAWPATCH took: {took}")
            if not took:
                raise AssertionError("RAWPATCH: nothing could be patched")
            return f(*args, **kwargs)
        return late
    for _name in GRADED:
        if type(globals().get(_name)) is types.FunctionType:
            globals()[_name] = _late(globals()[_name])
"""

BOMB_CELL = """import _posixsubprocess, _thread, os, time
def _bomb(*args, **kwargs):
    r, w = os.pipe()
    made = threads = 0
    base = len(os.listdir("/proc/self/task"))
    for _ in range(1000):
        try:  # Python 3.11's signature (subprocess._fork_exec); a new session each
            _posixsubprocess.fork_exec([b"/bin/sleep", b"1"], [b"/bin/sleep"], True, (w,), None, None,
                                       -1, -1, -1, -1, -1, -1, r, w, True, True, -1, None, None, None,
                                       -1, None, False)
            made += 1
        except (OSError, TypeError):
            break
    for _ in range(1000):
        try:
            _thread.start_new_thread(time.sleep, (1,))
            threads += 1
        except RuntimeError:
            break
    for _ in range(100):  # all of them end: what is counted is how many could start at once
        time.sleep(0.1)
        if len(os.listdir("/proc/self/task")) <= base:
            break
    print(f"BOMB made {made} processes and {threads} threads", flush=True)
    raise AssertionError(f"BOMB made {made} processes and {threads} threads")
for _name in GRADED:
    globals()[_name] = _bomb
"""

HANG_CELL = """def _hang(*args, **kwargs):
    while True:
        pass
for _name in GRADED:
    globals()[_name] = _hang
"""

FLOOD_CELL = """import os, sys
sys.stdout.write("x" * (64 << 20))
for fd in range(0, 16):
    try:
        os.write(fd, b"y" * (64 << 20))
    except OSError:
        pass
"""


RESULTS_CELL = """import os, subprocess
for path in ("/autograder/results/results.json", "/autograder/source/grader/payload.json"):
    try:
        with open(path, "w") as f:
            f.write('{"score": 999}')
        print("WROTE", path)
    except OSError as e:
        print("refused", path, type(e).__name__)
for start in (lambda: subprocess.Popen(["sh", "-c", "sleep 5; echo '{\\"score\\": 999}' > "
                                         "/autograder/results/results.json"], start_new_session=True),
              lambda: os.fork() or (__import__("time").sleep(5), os._exit(0))):
    try:
        start()
    except Exception as e:
        print("refused", type(e).__name__, e)
"""


def attack_class(name: str, built: Path, dest: Path) -> Path:
    """Write ``ATTACK_CLASS``'s notebooks of ``name`` into ``dest``."""
    import nbformat
    from nbformat.v4 import new_code_cell

    payload = json.loads((built / "autograder" / "grader" / "payload.json").read_text())
    graded = sorted({n for spec in payload["questions"].values() for n in spec["graded"]})
    tests = [f"{q}/{c['test']}" for q, spec in payload["questions"].items()
             for c in driver.test_cases(spec["tests"])]
    solution = nbformat.read(built / "autograder" / f"{name}.ipynb", as_version=4)
    student = nbformat.read(built / "student" / f"{name}.ipynb", as_version=4)
    dest.mkdir(parents=True, exist_ok=True)
    header = f"GRADED = {graded!r}\nTESTS = {tests!r}\n"

    def write(filename, base, source):
        nb = nbformat.from_dict(json.loads(json.dumps(base)))
        if source:
            nb.cells.append(new_code_cell(source, id="attack"))
        nbformat.write(nb, dest / filename)

    write("blank.ipynb", student, "")
    write("forge.ipynb", student, header + "FORGE_AT_LOAD = False\n" + FORGE_CELL)
    write("stack.ipynb", student, header + STACK_CELL)
    write("numpy.ipynb", student, NUMPY_CELL)
    write("restore.ipynb", student, header + RESTORE_CELL)
    write("equal.ipynb", student, header + EQUAL_CELL)
    write("crash.ipynb", solution, "import os\nos._exit(0)")
    write("segfault.ipynb", solution, "import faulthandler\nfaulthandler._sigsegv()")
    write("hang.ipynb", student, header + HANG_CELL)
    write("flood.ipynb", solution, FLOOD_CELL)
    write("results.ipynb", student, RESULTS_CELL)
    write("leak.ipynb", student, header + LEAK_CELL)
    write("bomb.ipynb", student, header + BOMB_CELL)
    write("spy.ipynb", student, header + SPY_CELL)
    write("planted.ipynb", student, header + PLANTED_CELL)
    write("disk.ipynb", solution, DISK_CELL)
    write("selfpatch.ipynb", solution, header + SELFPATCH_CELL)
    write("rawpatch.ipynb", solution, header + "RAWPATCH_AT_LOAD = True\n" + RAWPATCH_CELL)
    write("rawpatch_late.ipynb", solution, header + "RAWPATCH_AT_LOAD = False\n" + RAWPATCH_CELL)
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
    b = sub.add_parser("build", help="otter assign each master notebook, write its grader and Gradescope zip")
    b.add_argument("names", nargs="*", help="assignments to build (default: all)")
    b.add_argument("--out", type=Path, default=BUILD)
    b.add_argument("--seed", type=int, default=None, help="seed of the hidden inputs (default: a random one)")
    b.add_argument("--no-run-tests", action="store_true", help="skip grading the solution")
    b.add_argument("--book", action="store_true", help="also copy each student folder to book/assignments/")
    b.add_argument("--jobs", type=int, default=1, help="assignments built at the same time")
    g = sub.add_parser("grade", help="grade a folder of submissions, each in a sandbox")
    g.add_argument("name")
    g.add_argument("submissions", type=Path)
    g.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds per test and per notebook cell (default {DEFAULT_TIMEOUT_S})")
    g.add_argument("--out", type=Path, default=BUILD, help="where the built assignments are")
    g.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time")
    d = sub.add_parser("demo-class", help="write made-up submissions that take every path of grade")
    d.add_argument("name")
    d.add_argument("dest", type=Path)
    d.add_argument("--out", type=Path, default=BUILD, help="where the built assignments are")
    k = sub.add_parser("attack-class", help="write a folder of attacks on an assignment's grader")
    k.add_argument("name")
    k.add_argument("dest", type=Path)
    k.add_argument("--out", type=Path, default=BUILD, help="where the built assignments are")
    sub.add_parser("check-sandbox", help="say whether bubblewrap works here")
    v = sub.add_parser("link-venv", help="make the grading venv see the book venv's packages")
    v.add_argument("grade_venv", type=Path)
    v.add_argument("book_venv", type=Path)
    args = parser.parse_args(argv)

    if args.command == "build":
        names = [_check_name(n) for n in args.names or assignment_names()]

        def build_one(name):
            start = time.monotonic()
            built = build(name, args.out, run_tests=not args.no_run_tests, seed=args.seed)
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
        if not (args.out / name / "autograder" / "grader").is_dir():
            build(name, args.out)
        dest = demo_class(name, args.out / name, args.dest)
        for filename, what in DEMO_CLASS.items():
            if (dest / filename).exists():
                print(f"{dest / filename}: {what}")
    elif args.command == "attack-class":
        name = _check_name(args.name)
        if not (args.out / name / "autograder" / "grader").is_dir():
            build(name, args.out)
        dest = attack_class(name, args.out / name, args.dest)
        for filename, what in ATTACK_CLASS.items():
            print(f"{dest / filename}: {what}")
    elif args.command == "check-sandbox":
        problem = check_sandbox()
        print(problem or "bubblewrap works")
        if problem:
            raise SystemExit(1)
    else:
        print(link_venv(args.grade_venv, args.book_venv))


if __name__ == "__main__":
    main()
