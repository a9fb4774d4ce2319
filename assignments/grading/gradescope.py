"""Gradescope's entry point: grade /autograder/submission's notebook, write results.json.

``run_autograder`` (in the zip ``make assignments`` writes) calls

    python3 grader/lib/grading/gradescope.py SUBMISSION_DIR RESULTS_JSON

Gradescope grades each submission in a container of its own, so the container is the
sandbox between students. Inside it, the payload (reference and hidden tests) is read into
this process and its file removed before any student code runs; when this runs as root
(Gradescope does), the runner drops to ``nobody`` and its scratch folder is the only place
it can write. The tests run exactly as under ``make grade`` (runner.py, driver.py).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from grading import driver

PER_TEST_S = float(os.environ.get("GRADER_TIMEOUT_S", "60"))


def _others_can_run(python: Path) -> bool:
    """Whether ``nobody`` can start this Python (every folder on the way is world-searchable)."""
    for path in [python, *python.resolve().parents, python.resolve()]:
        try:
            mode = path.stat().st_mode
        except OSError:
            return False
        if path.is_dir() and not mode & 0o001:
            return False
    return True


def main(submission_dir: str, results_json: str) -> None:
    payload_path = HERE.parent.parent / "payload.json"
    payload = json.loads(payload_path.read_text())
    if os.environ.get("GRADER_KEEP_PAYLOAD") != "1":
        payload_path.unlink()  # this container grades one submission; nothing else needs it
    out = Path(results_json)
    out.parent.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(Path(submission_dir).glob("*.ipynb"))
    if len(notebooks) != 1:
        found = ", ".join(p.name for p in notebooks) or "none"
        out.write_text(json.dumps({"score": 0, "output": f"hand in exactly one .ipynb file (found: {found})"}))
        return
    try:  # plain JSON: the autograder needs nothing but NumPy and minigrad
        nb = json.loads(notebooks[0].read_text())
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
    except Exception as e:
        out.write_text(json.dumps({"score": 0, "output": f"malformed notebook ({type(e).__name__}: {e})"}))
        return
    cells = driver.export_cells(nb)
    work = Path(tempfile.mkdtemp(prefix="grade-"))
    scratch = work / "scratch"
    scratch.mkdir()
    preexec = None
    if os.geteuid() == 0 and _others_can_run(Path(sys.executable)):
        os.chown(scratch, 65534, 65534)

        def preexec():
            os.setgid(65534)
            os.setuid(65534)
    graded = driver.grade_export(cells, payload, scratch,
                                 lambda: [sys.executable, "-I", str(HERE / "runner.py"), str(scratch), str(PER_TEST_S)],
                                 per_test_s=PER_TEST_S, load_s=PER_TEST_S * max(1, len(cells)) + 30,
                                 preexec=preexec)
    shutil.rmtree(work, ignore_errors=True)
    out.write_text(json.dumps(driver.gradescope_results(graded), indent=1))
    print(driver.feedback_text(payload["assignment"], notebooks[0].name, graded))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
