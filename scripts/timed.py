"""Run one phase of `make test` and report its wall time.

Usage: python scripts/timed.py "phase name" -- COMMAND [ARGS...]

Prints a line with the phase's wall and CPU time when it ends and appends it to
_build/test-phases.txt, which `make test` prints at the end, or here when the phase
fails (the 20-minute budget is checked phase by phase). Exits with the command's status.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(__file__).resolve().parents[1] / "_build" / "test-phases.txt"


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__)
        return 2
    name, command = argv[0], argv[2:]
    start, cpu_start = time.perf_counter(), os.times()
    status = subprocess.run(command).returncode
    wall = time.perf_counter() - start
    end = os.times()
    cpu = (end.children_user - cpu_start.children_user) + (end.children_system - cpu_start.children_system)
    line = (f"{name:42s} {wall:7.1f} s wall {cpu:7.1f} s CPU"
            f"  {'ok' if status == 0 else f'FAILED (exit {status})'}")
    print(f"== {line}", flush=True)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a") as log:
        log.write(line + "\n")
    if status != 0:   # make stops here: show every phase so far
        print("make test: phases so far\n" + LOG.read_text(), end="", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
