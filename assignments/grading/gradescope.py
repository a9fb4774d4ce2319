"""Gradescope's entry point: grade /autograder/submission's notebook, write results.json.

``run_autograder`` (in the zip ``make assignments`` writes) calls, as root,

    /autograder/venv/bin/python grader/lib/grading/gradescope.py SUBMISSION_DIR RESULTS_JSON

Gradescope grades each submission in a container of its own. In it, this process (root)
reads the payload and removes its file before any notebook code runs; then it runs the
reference solution and the submission, one after the other, each in a runner that has
dropped to ``nobody`` (uid 65534) in a fresh folder of its own, with limits on processes
and file sizes and a quota on what it writes to disk (``DiskQuota``), and kills every
process of ``nobody`` and removes its files after each. The submission's code
can write neither the results file (root's) nor anything the grader reads back; its
answers come back as data and are judged here against the reference's, taken on this
machine. The tests run exactly as under ``make grade`` (runner.py, driver.py).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from grading import driver  # noqa: E402

PER_TEST_S = float(os.environ.get("GRADER_TIMEOUT_S", "60"))
NOBODY = 65534
FILE_LIMIT_BYTES = 64 << 20
PROCESS_LIMIT = 64
# Address space of each runner (as ``make grade``'s sandbox): a notebook that allocates
# without end fails its own cell or test with MemoryError instead of taking the container.
MEMORY_LIMIT_BYTES = int(os.environ.get("GRADER_MEMORY_LIMIT_BYTES", 16 << 30))


def runnable_by_nobody(path: Path) -> str:
    """"" if ``nobody`` can run this Python (every folder on the way searchable by others,
    the files readable), else the first path that stops it."""
    for p in [path, *path.parents, path.resolve(), *path.resolve().parents]:
        try:
            mode = p.stat().st_mode
        except OSError:
            return str(p)
        if p.is_dir() and not mode & 0o001:
            return str(p)
        if p.is_file() and not mode & 0o004:
            return str(p)
    return ""


def set_limits() -> None:
    """The runner's limits: processes, file size, memory (address space), no core dumps."""
    resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES, FILE_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _as_nobody(home: str):
    def start():  # the runner's own session comes from Popen(start_new_session=True)
        set_limits()
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        os.chdir(home)
    return start


def kill_everything_of_nobody() -> None:
    """Every process of ``nobody`` (what a notebook may have left running), killed."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.kill(-1, signal.SIGKILL)  # every process this user may signal, itself last
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


DISK_QUOTA_BYTES = 512 << 20
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")  # writable by everyone, nobody included


class DiskQuota:
    """What ``nobody`` may write to disk while one notebook is graded: Gradescope's /tmp
    has no quota of its own. Called, it returns "" or why the runner is over its quota:
    the growth of every file system nobody can write to (its folder's and the shared
    folders'), measured with statvfs. ``clean()`` stops every process of nobody and removes
    what nobody made in those folders (its own folder stays, emptied)."""

    def __init__(self, home: Path, limit_bytes: int = DISK_QUOTA_BYTES):
        self.home, self.limit = home, limit_bytes
        self.devices = {}
        for folder in (str(home), *SHARED_FOLDERS):
            try:
                self.devices.setdefault(os.stat(folder).st_dev, folder)
            except OSError:
                continue
        self.base = self._used()

    def _used(self) -> dict:
        out = {}
        for dev, folder in self.devices.items():
            st = os.statvfs(folder)
            out[dev] = (st.f_blocks - st.f_bfree) * st.f_frsize
        return out

    def __call__(self) -> str:
        grown = sum(max(0, used - self.base.get(dev, used)) for dev, used in self._used().items())
        if grown > self.limit:
            return (f"the notebook wrote more than {self.limit >> 20} MiB to disk "
                    f"({grown >> 20} MiB); what it wrote was removed")
        return ""

    def clean(self) -> None:
        kill_everything_of_nobody()
        for folder in SHARED_FOLDERS:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_uid != NOBODY:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                except OSError:
                    continue
        self.home.mkdir(exist_ok=True)
        for entry in self.home.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def run_as_nobody(cells, payload, reference: bool = False) -> dict:
    """One runner as ``nobody`` in a fresh folder (root-made, then given to nobody), its
    writes to disk under ``DiskQuota``."""
    home = Path(tempfile.mkdtemp(prefix="grade-", dir="/tmp"))
    os.chmod(home, 0o700)
    os.chown(home, NOBODY, NOBODY)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(home)}
    quota = DiskQuota(home)
    try:
        return driver.run_notebook(lambda: [sys.executable, "-I", str(HERE / "runner.py")], cells,
                                   payload["given"], driver.plan_tests(payload), PER_TEST_S, env=env,
                                   preexec=_as_nobody(str(home)), reference=reference, watch=quota)
    finally:
        quota.clean()
        shutil.rmtree(home, ignore_errors=True)


def main(submission_dir: str, results_json: str) -> None:
    out = Path(results_json)
    out.parent.mkdir(parents=True, exist_ok=True)

    def fail(message):
        out.write_text(json.dumps({"score": 0, "output": message}))
        print(message)

    payload_path = HERE.parent.parent / "payload.json"
    payload = json.loads(payload_path.read_text())
    if os.environ.get("GRADER_KEEP_PAYLOAD") != "1":
        payload_path.unlink()  # this container grades one submission; nothing else needs it
    if os.geteuid() != 0:
        return fail("the autograder must run as root (as Gradescope runs it): it grades as nobody")
    blocked = runnable_by_nobody(Path(sys.executable)) or runnable_by_nobody(HERE / "runner.py")
    if blocked:
        return fail(f"autograder setup problem: nobody cannot reach {blocked} (make it world-readable)")
    notebooks = sorted(Path(submission_dir).glob("*.ipynb"))
    if len(notebooks) != 1:
        found = ", ".join(p.name for p in notebooks) or "none"
        return fail(f"hand in exactly one .ipynb file (found: {found})")
    try:  # plain JSON: the autograder needs nothing but NumPy and minigrad
        nb = json.loads(notebooks[0].read_text())
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
    except (ValueError, UnicodeDecodeError, OSError) as e:
        return fail(f"malformed notebook ({type(e).__name__}: {e})")
    try:
        reference_run = run_as_nobody(payload["reference"], payload, reference=True)
    except driver.Unguarded as e:  # fail closed: no grade where the guard is incomplete
        return fail(f"autograder error: {e}")
    problems = driver.probes.reference_problems(reference_run["records"])
    if reference_run["tampered"] or reference_run["cell_errors"] or problems:
        detail = reference_run["tampered"] or "; ".join(reference_run["cell_errors"] + problems)
        return fail(f"autograder error: the reference solution fails its own tests here: {detail[:1500]}")
    run = run_as_nobody(driver.export_cells(nb), payload)
    graded = driver.judge_run(payload, run, reference_run["records"])
    out.write_text(json.dumps(driver.gradescope_results(graded), indent=1))
    print(driver.feedback_text(payload["assignment"], notebooks[0].name, graded))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
