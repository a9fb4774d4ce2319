"""Run every notebook under other library versions: the declared minimum and the newest.

Usage: python scripts/compat.py [--stacks minimum newest] [NOTEBOOK ...]

`make compat` calls it (it is not part of `make test`: it installs two stacks, several
GB with torch's CUDA wheels). For each stack it creates a virtual environment in
.compat/<stack>/ (kept for the next run; delete the folder to reclaim the disk),
installs the stack, Jupyter's kernel and, from this checkout, minigrad and bookkit as
a package (as a reader's `pip install git+...` would); an existing venv is brought
back to the stack's pins first, since a notebook's own install cell may have changed it, then runs each notebook copied
alone into an empty folder: no repository on the path, no myst-nb, like a fresh Colab
runtime. It prints a notebook x stack table and writes it to reports/compat.md; the
executed copies are kept in .compat/<stack>/executed/.

A notebook passes when every cell runs without an error (its own asserts included);
outputs are not compared with the stored ones, which belong to the pinned versions.
The minimum stack is exactly bookkit.versions.MINIMUM, plus the minimum a chapter's setup
cell declares for a package the book does not (jax for "The same idea in JAX"); tests/test_versions.py
checks both. The newest stack takes the newest releases pip can install here (torch is
capped at 2.14.1 on this machine). A chapter whose own minimum is above a stack's version
"stops as declared" there: its setup cell's one line (bookkit.require installs nothing
under make compat).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENVS = ROOT / ".compat"
REPORT = ROOT / "reports" / "compat.md"
PACKAGES = ("numpy", "matplotlib", "torch", "transformers", "peft", "accelerate", "jax",
            "scipy")
KERNEL = ["ipykernel", "nbclient", "nbformat"]
STACKS = {
    # The declared minimum (bookkit/versions.py MINIMUM, pyproject.toml): oldest release
    # of each minimum minor version that has a Python 3.11 wheel.
    # jax: "The same idea in JAX"'s own minimum (its setup cell says jax="0.6").
    "minimum": ["numpy==1.26.4", "matplotlib==3.8.4", "torch==2.5.1", "transformers==4.57.6",
                "peft==0.17.1", "accelerate==1.3.0", "jax==0.6.0", "scipy==1.11.4"],
    # The newest releases available here.
    "newest": ["numpy", "matplotlib", "torch<=2.14.1", "transformers", "peft", "accelerate", "jax",
               "scipy"],
}
TIMEOUT_S = 900

RUNNER = r"""
import json, re, sys, time, traceback
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
start = time.perf_counter()
result = {"ok": True, "error": ""}
try:
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": sys.argv[2]}}).execute()
except CellExecutionError as err:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    ename = getattr(err, "ename", "") or "error"
    evalue = re.sub(r"\x1b\[[0-9;]*m", "", getattr(err, "evalue", "") or "").strip()
    if not evalue:   # a bare assert: show the line that failed
        marked = [l for l in text.splitlines() if l.lstrip().startswith("---->")]
        evalue = marked[-1].split("---->", 1)[1].strip().lstrip("0123456789 ") if marked else ""
    result = {"ok": False, "error": f"{ename}: {evalue.splitlines()[0] if evalue else ''}"[:200]}
except Exception as err:
    result = {"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0][:160]}
result["seconds"] = time.perf_counter() - start
nbformat.write(nb, path)
print("COMPAT-RESULT " + json.dumps(result))
"""


def venv_python(stack: str) -> Path:
    return VENVS / stack / "bin" / "python"


def _freeze(stack: str) -> list[str]:
    out = subprocess.run([str(venv_python(stack)), "-m", "pip", "freeze", "--exclude-editable",
                          "--disable-pip-version-check"], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line and not line.lower().startswith("minigrad")]


def prepare(stack: str) -> dict[str, str]:
    """Create the stack's venv, or bring it back to exactly what it was when created
    (a notebook's own install cell may have added or changed packages last time);
    return the installed versions."""
    spec = STACKS[stack]
    folder, snapshot = VENVS / stack, VENVS / stack / "stack-freeze.txt"
    pip = [str(venv_python(stack)), "-m", "pip", "-qq", "--disable-pip-version-check"]
    if not (venv_python(stack).is_file() and snapshot.is_file()):
        shutil.rmtree(folder, ignore_errors=True)
        print(f"compat: creating {folder.relative_to(ROOT)}: {' '.join(spec)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run(pip[:3] + ["install"] + pip[3:] + spec + KERNEL, check=True)
        snapshot.write_text("\n".join(_freeze(stack)) + "\n")
    else:
        wanted = snapshot.read_text().split()
        names = {line.split("==")[0].lower() for line in wanted}
        extra = [line.split("==")[0] for line in _freeze(stack)
                 if line.split("==")[0].lower() not in names and "==" in line]
        if extra:
            print(f"compat: {stack}: removing what a notebook installed: {' '.join(extra)}", flush=True)
            subprocess.run(pip[:3] + ["uninstall", "-y"] + pip[3:] + extra, check=True)
        subprocess.run(pip[:3] + ["install", "--no-deps"] + pip[3:] + ["-r", str(snapshot)], check=True)
    # minigrad and bookkit from this checkout, as a package (reinstalled on every run)
    subprocess.run(pip[:3] + ["install", "--no-deps", "--force-reinstall"] + pip[3:] + [str(ROOT)],
                   check=True, cwd=tempfile.gettempdir())
    code = ("import json, platform; from importlib.metadata import version; "
            f"print(json.dumps({{'python': platform.python_version(), "
            f"**{{p: version(p) for p in {list(PACKAGES)!r}}}}}))")
    out = subprocess.run([str(venv_python(stack)), "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def run_notebook(stack: str, notebook: Path) -> dict:
    """Execute a copy of `notebook`, alone in an empty folder, with the stack's Python."""
    with tempfile.TemporaryDirectory(prefix="compat-") as folder:
        copy = Path(folder) / notebook.name
        shutil.copy(notebook, copy)
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MPLBACKEND", "MPLCONFIGDIR")}
        env["PYTHONNOUSERSITE"] = "1"
        env["BOOKKIT_NO_INSTALL"] = "1"   # bookkit.require must not change the stack
        try:
            done = subprocess.run([str(venv_python(stack)), "-c", RUNNER, str(copy), folder],
                                  cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"timed out after {TIMEOUT_S} s", "seconds": TIMEOUT_S}
        executed = VENVS / stack / "executed"     # the run's outputs, for a look afterwards
        executed.mkdir(exist_ok=True)
        shutil.copy(copy, executed / notebook.name)
        line = next((l for l in done.stdout.splitlines() if l.startswith("COMPAT-RESULT ")), None)
        if line is None:
            return {"ok": False, "error": (done.stderr.strip().splitlines() or ["no result"])[-1][:160],
                    "seconds": 0.0}
        return json.loads(line.removeprefix("COMPAT-RESULT "))


def table(notebooks: list[Path], stacks: list[str], versions: dict, results: dict) -> str:
    lines = ["# Compatibility: every notebook under other library versions", "",
             f"`make compat` ({time.strftime('%Y-%m-%d', time.gmtime())}, "
             f"{platform.machine()}, CPU only): each notebook copied alone into an empty folder "
             "and run top to bottom (its asserts included) with minigrad and bookkit installed "
             "from this checkout. Outputs are not compared with the stored ones.", "",
             "| stack | " + " | ".join(("python",) + PACKAGES) + " |",
             "|---|" + "---|" * (len(PACKAGES) + 1)]
    for stack in stacks:
        lines.append(f"| {stack} | " + " | ".join(versions[stack].get(k, "?")
                                                    for k in ("python",) + PACKAGES) + " |")
    lines += ["", "| notebook | " + " | ".join(stacks) + " |", "|---|" + "---|" * len(stacks)]
    for nb in notebooks:
        cells = []
        for stack in stacks:
            r = results[stack, nb.name]
            if r["ok"]:
                cells.append(f"pass ({r['seconds']:.0f} s)")
            elif r["error"].startswith("RuntimeTooOld"):   # the setup cell's one-line stop
                cells.append("stops as declared: " + r["error"].split(": ", 2)[-1].split(":")[0])
            else:
                cells.append("FAIL: " + r["error"].replace("|", "\\|"))
        lines.append(f"| {nb.stem} | " + " | ".join(cells) + " |")
    passed = {s: sum(results[s, nb.name]["ok"] for nb in notebooks) for s in stacks}
    stopped = {s: sum(results[s, nb.name]["error"].startswith("RuntimeTooOld")
                      for nb in notebooks) for s in stacks}
    lines += ["", "Passed: " + ", ".join(f"{s} {passed[s]}/{len(notebooks)}" for s in stacks)
              + ". \"stops as declared\": the chapter declares a higher minimum than the book "
              "and its setup cell stopped with that one line (`make compat` forbids "
              "bookkit.require to install anything, so that a stack stays what it is).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stacks", nargs="+", default=list(STACKS), choices=list(STACKS))
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    notebooks = [p.resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    versions, results = {}, {}
    for stack in args.stacks:
        versions[stack] = prepare(stack)
        for nb in notebooks:
            results[stack, nb.name] = r = run_notebook(stack, nb)
            status = ("pass" if r["ok"] else "stops as declared" if r["error"].startswith("RuntimeTooOld")
                      else "FAIL " + r["error"])
            print(f"compat: {stack:8s} {nb.name:40s} {status} ({r['seconds']:.0f} s)", flush=True)
    report = table(notebooks, args.stacks, versions, results)
    print("\n" + report)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(report)
    return 0 if all(r["ok"] or r["error"].startswith("RuntimeTooOld")
                    for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
