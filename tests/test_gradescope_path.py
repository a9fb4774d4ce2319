"""The Gradescope zip as Gradescope runs it (its own file, so that `make test` runs it on
one worker while tests/test_assignments.py grades its classes on the other)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from test_assignments import GRADESCOPE_NAME, GRADESCOPE_PROCESS_LIMIT, SEED, bomb_counts, grade_env, script

pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built")
    grade_env("build", GRADESCOPE_NAME, "--out", out, "--no-run-tests", "--seed", SEED)
    return out


def test_gradescope_as_gradescope_runs_it(built, tmp_path):
    """The zip as Gradescope runs it: as root, the zip unpacked in a bind-mounted
    /autograder/source, setup.sh with the machine's own python3 (Debian's /usr/bin/python3
    here, on a PATH without any other Python), then run_autograder on each submission in a
    fresh copy of the source folder. The solution scores full marks, the notebook as handed
    out 0; a forging notebook and one that writes results.json (directly and from a process
    meant to outlive the grader) score no more than it."""
    name = GRADESCOPE_NAME
    if os.geteuid() != 0:
        pytest.skip("Gradescope runs the autograder as root, and so must this test")
    zpath = script.autograder_zip(built / GRADESCOPE_NAME)
    root = tmp_path / "autograder"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}

    def as_gradescope(command, timeout):
        return subprocess.run(["bwrap", "--dev-bind", "/", "/", "--bind", str(root), "/autograder",
                               "--chdir", "/autograder/source", "bash", "-c", command],
                              env=env, capture_output=True, text=True, timeout=timeout)

    def fresh_source():
        shutil.rmtree(root / "source", ignore_errors=True)
        with zipfile.ZipFile(zpath) as z:
            z.extractall(root / "source")
        for info in zipfile.ZipFile(zpath).infolist():  # Gradescope keeps the modes
            (root / "source" / info.filename).chmod((info.external_attr >> 16) & 0o777)

    root.mkdir()
    fresh_source()
    setup = as_gradescope("bash setup.sh", 1800)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
    assert os.path.realpath(root / "venv" / "bin" / "python").startswith("/usr/bin/python3"), \
        "setup.sh must make the venv from the image's own python3"
    attacks = tmp_path / "attacks"
    grade_env("attack-class", name, attacks, "--out", built)
    submissions = {"solution": built / name / "autograder" / f"{name}.ipynb", "blank": attacks / "blank.ipynb",
                   "forge": attacks / "forge.ipynb", "results": attacks / "results.ipynb",
                   "bomb": attacks / "bomb.ipynb", "leak": attacks / "leak.ipynb",
                   "disk": attacks / "disk.ipynb"}
    scores = {}
    for who, notebook in submissions.items():
        fresh_source()
        for folder in ("submission", "results"):
            shutil.rmtree(root / folder, ignore_errors=True)
            (root / folder).mkdir()
        shutil.copy(notebook, root / "submission" / notebook.name)
        run = as_gradescope("bash run_autograder", 900)
        assert run.returncode == 0, f"{who}: {run.stderr[-2000:]}"
        assert not (root / "source" / "grader" / "payload.json").exists(), "the payload must be gone"
        time.sleep(6 if who == "results" else 0)  # what the attack left behind had its chance
        result = json.loads((root / "results" / "results.json").read_text())
        scores[who] = result["score"]
        outputs = "\n".join(t["output"] for t in result["tests"])
        if who == "bomb":  # nobody, limited to PROCESS_LIMIT processes and threads
            counts = bomb_counts(outputs)
            assert counts and max(p + t for p, t in counts) <= GRADESCOPE_PROCESS_LIMIT, counts
        if who == "leak":
            assert "LEAK " in outputs and "GOT " not in outputs, outputs[:3000]
        if who in ("solution", "disk"):  # disk: the answers, then 2 GiB written to /tmp and the like
            full = sum(t["max_score"] for t in result["tests"])
            assert full > 0 and result["score"] == full, f"{who} scored {result['score']} / {full}"
        left = [p for folder in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(folder)
                for p in Path(folder).iterdir() if p.name.startswith("fill-") and p.owner() == "nobody"]
        assert not left, f"{who}: files nobody wrote were left behind: {left[:3]}"
    assert scores["blank"] == 0, scores
    assert all(scores[who] <= scores["blank"] for who in ("forge", "results", "bomb", "leak")), scores
