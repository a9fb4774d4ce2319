"""assignments/grading/driver.py's process handling, without a sandbox or a notebook."""
from __future__ import annotations

import subprocess
import sys

from bookpaths import ROOT

sys.path.insert(0, str(ROOT / "assignments"))
from grading import driver  # noqa: E402


def test_exit_code_waits_for_a_process_whose_output_ended_first():
    # The output closes 1.5 s before the process exits (as a runner's does
    # inside bubblewrap, which exits after it): poll() at once would see no code yet.
    proc = subprocess.Popen([sys.executable, "-c",
                             "import os, time; os.close(1); time.sleep(1.5); os._exit(3)"],
                            stdout=subprocess.PIPE)
    assert proc.stdout.read() == b""
    assert proc.poll() is None
    assert driver._exit_code(proc, wait_s=5.0) == 3


def test_exit_code_of_a_process_still_running_is_none():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert driver._exit_code(proc, wait_s=0.2) is None
        assert driver._exit_code(proc, wait_s=0.0) is None
    finally:
        proc.kill()
        proc.wait()
