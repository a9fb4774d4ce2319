"""Grade one exported submission in a runner process of its own, results as data.

Used by ``scripts/assignments.py grade`` (each process inside bubblewrap) and by the
Gradescope autograder (``gradescope.py``, where the container is the sandbox). This module
never runs student code itself: it starts ``runner.py``, reads its JSON lines, enforces
the time limits by killing the process, and restarts it after a test that hung so that a
hang costs only that test.
"""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
import selectors
import signal
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAGIC = re.compile(r"^\s*[%!]")
GRADER_CALL = re.compile(r"(grader\s*\.\s*(check|check_all|export)\s*\(|otter\s*\.\s*Notebook\s*\()")


def export_cells(nb) -> list[dict]:
    """The code cells a grader runs, as data: the setup cell (which installs packages and
    makes an otter grader) is left out, and so are IPython magics and ``grader.check``
    calls. ``nb`` is the notebook's JSON (a dict; nbformat's nodes are dicts too).
    Returns ``[{"index": i, "source": text}, ...]``."""
    cells, first = [], True
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = source if isinstance(source, str) else "".join(source)
        if first and ("otter.Notebook" in source or "ASSIGNMENT =" in source):
            first = False
            continue
        first = False
        kept = [ln for ln in source.splitlines() if not MAGIC.match(ln) and not GRADER_CALL.search(ln)]
        text = "\n".join(kept)
        if text.strip():
            cells.append({"index": i, "source": text})
    return cells


def graded_names(master) -> dict[str, list[str]]:
    """Each question's graded names: what its solution cells define at the top level."""
    names, question, inside = {}, None, False
    for cell in master.cells:
        text = cell.source.strip()
        if cell.cell_type == "raw" and text.startswith("# BEGIN QUESTION"):
            question = re.search(r"name:\s*(\S+)", text).group(1)
            names[question] = []
        elif cell.cell_type == "raw" and text == "# END QUESTION":
            question = None
        elif cell.cell_type == "raw" and text == "# BEGIN SOLUTION":
            inside = True
        elif cell.cell_type == "raw" and text == "# END SOLUTION":
            inside = False
        elif cell.cell_type == "code" and inside and question:
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names[question].append(node.name)
                elif isinstance(node, ast.Assign):
                    names[question] += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return {q: sorted(set(v)) for q, v in names.items()}


def test_cases(source: str) -> list[dict]:
    """(name, points, hidden) of every test case of an otter test file, in order."""
    found = re.findall(r"@test_case\(points=([\d.]+), hidden=(True|False).*?\)\ndef (\w+)\(", source, re.S)
    return [{"test": fn, "points": float(p), "hidden": h == "True"} for p, h, fn in found]


class Tampering(Exception):
    pass


def _run_question(cmd, payload_base, question, cases, per_test_s, load_s, log, env=None, preexec=None,
                  fresh=None):
    """Run ``question``'s tests, restarting the runner after a test that hung or crashed.
    ``fresh()`` rewrites the submission's exported cells before each start (a submission
    may erase or change its own scratch copy). Returns (results by test name, cell errors)."""
    results, cell_errors, skip = {}, [], []
    while True:
        todo = [c for c in cases if c["test"] not in results]
        if not todo:
            return results, cell_errors
        if fresh is not None:
            fresh()
        token = secrets.token_hex(16)
        payload = dict(payload_base, token=token, skip=sorted(results) + skip)
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                start_new_session=True, env=env, preexec_fn=preexec)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + load_s
        phase, current, buf = "load", None, b""
        done = loaded = timed_out = ended_output = False
        try:
            while not done:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    ended_output = True
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        raise Tampering("the results channel carried something other than the grader's messages")
                    kind = msg.get("kind")
                    if kind == "tampered":
                        raise Tampering(msg.get("detail", ""))
                    if kind == "loaded":
                        if loaded:
                            raise Tampering("a second 'loaded' message (forged by the submission)")
                        loaded = True
                        cell_errors = msg.get("cell_errors", [])
                        proc.stdin.write((json.dumps(payload) + "\n").encode())
                        proc.stdin.flush()
                        phase, deadline = "reference", time.monotonic() + load_s
                        continue
                    if msg.get("token") != token:
                        raise Tampering("a result line without the grader's token (forged by the submission)")
                    if kind == "error":
                        raise RuntimeError(msg.get("detail"))
                    if kind == "start":
                        phase, current = "test", msg["test"]
                        deadline = time.monotonic() + per_test_s + 10
                    elif kind == "result":
                        results[msg["test"]] = msg
                        current, phase = None, "between"
                        deadline = time.monotonic() + per_test_s + 10
                    elif kind == "done":
                        done = True
        finally:
            exit_code = _exit_code(proc, wait_s=5.0 if ended_output else 0.0)
            _kill(proc)
        ended = "was stopped" if timed_out or exit_code is None else f"ended with exit code {exit_code}"
        if done:
            for c in todo:  # every test reported (a missing one is a grader bug)
                results.setdefault(c["test"], dict(c, passed=False, message="the test did not run"))
            return results, cell_errors
        if phase == "load":
            why = (f"running your notebook's cells did not finish within {load_s:g} s" if timed_out else
                   f"the process running your notebook's cells {ended} before any test ran")
            for c in todo:
                results[c["test"]] = dict(c, passed=False, message=f"Error: {why}")
            return results, cell_errors
        if current is None:  # ended between tests (or in the reference): blame the next one
            current = next((c["test"] for c in todo if c["test"] not in results), None)
            if current is None:
                return results, cell_errors
        case = next(c for c in cases if c["test"] == current)
        results[current] = dict(case, passed=False,
                                message=(f"TimeoutError: the test did not finish within {per_test_s:g} s; the process "
                                         f"was stopped" if timed_out else
                                         f"Error: the process running the test {ended}"))


def _exit_code(proc, wait_s: float):
    """The runner's exit code, or None if it is still running after ``wait_s`` seconds.
    Its output can end a moment before the process does (bubblewrap, its parent, exits
    after it), so a process whose output ended gets a few seconds to report its code."""
    try:
        return proc.wait(timeout=wait_s) if wait_s > 0 else proc.poll()
    except subprocess.TimeoutExpired:
        return None


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except (OSError, BrokenPipeError):
            pass
    proc.wait()


def grade_export(cells, payload, scratch: Path, command, per_test_s: float, load_s: float,
                 env=None, preexec=None) -> dict:
    """Grade exported cells against an assignment's payload (see scripts/assignments.py:
    ``reference``, ``questions`` {q: {graded, tests}}, ``seed``). ``command()`` is the argv
    that starts the runner on ``scratch`` (inside a sandbox or not): one process for the
    submission, and a new one for the tests left after a test that hangs or ends it.

    Returns {"points", "max_points", "reason", "tests": [...], "cell_errors": [...]}."""
    scratch.mkdir(parents=True, exist_ok=True)
    exported = json.dumps(cells)

    def fresh():
        target = scratch / "student.json"
        if target.is_symlink() or target.exists():
            if target.is_dir() and not target.is_symlink():
                import shutil
                shutil.rmtree(target)
            else:
                target.unlink()
        target.write_text(exported)
    tests, cell_errors, reason = [], [], ""
    log_path = scratch.parent / f"{scratch.name}-runner.log"
    cases = [dict(c, question=q, test=f"{q}/{c['test']}") for q, spec in payload["questions"].items()
             for c in test_cases(spec["tests"])]
    base = {"seed": payload["seed"], "reference": payload["reference"], "per_test_s": per_test_s,
            "questions": {q: {"graded": spec["graded"], "tests": spec["tests"]}
                          for q, spec in payload["questions"].items()}}
    with open(log_path, "ab") as log:
        try:
            results, cell_errors = _run_question(command(), base, "all", cases, per_test_s, load_s,
                                                 log, env=env, preexec=preexec, fresh=fresh)
        except Tampering as e:
            reason = f"tampering detected: {e}"
            results = {}
    for c in cases:
        r = results.get(c["test"], {})
        tests.append({"question": c["question"], "test": c["test"].split("/", 1)[1], "points": c["points"],
                      "hidden": c["hidden"], "passed": bool(r.get("passed")),
                      "message": r.get("message", ""), "seconds": r.get("seconds")})
    if reason:
        return {"points": 0.0, "max_points": _max(payload), "reason": reason, "tests": tests,
                "cell_errors": cell_errors}
    points = sum(t["points"] for t in tests if t["passed"])
    if points == 0 and tests:
        first = next((t for t in tests if t["message"]), None)
        reason = "no test passed" + (f" (first failure: {first['question']} {first['test']}: "
                                     f"{first['message'].splitlines()[-1][:200]})" if first else "")
    return {"points": points, "max_points": _max(payload), "reason": reason, "tests": tests,
            "cell_errors": cell_errors}


def _max(payload) -> float:
    return sum(c["points"] for spec in payload["questions"].values() for c in test_cases(spec["tests"]))


def feedback_text(name: str, submission: str, graded: dict) -> str:
    """The per-student feedback file: every test, passed or not, with its message."""
    lines = [f"{name}: {submission}", f"score: {graded['points']:g} / {graded['max_points']:g}"]
    if graded["reason"]:
        lines.append(f"note: {graded['reason']}")
    if graded["cell_errors"]:
        lines.append("cells of your notebook that raised an error when graded:")
        lines += [f"  {e}" for e in graded["cell_errors"]]
    question = None
    for t in graded["tests"]:
        if t["question"] != question:
            question = t["question"]
            lines.append(f"\n{question}")
        kind = "hidden" if t["hidden"] else "public"
        mark = "passed" if t["passed"] else "FAILED"
        lines.append(f"  [{mark}] {t['test']} ({kind}, {t['points']:g} point{'s' if t['points'] != 1 else ''})")
        if not t["passed"] and t["message"]:
            lines += [f"      {ln}" for ln in t["message"].splitlines()[-6:]]
    return "\n".join(lines) + "\n"


def gradescope_results(graded: dict) -> dict:
    """Gradescope's results.json."""
    tests = [{"name": f"{t['question']} {t['test']}", "score": t["points"] if t["passed"] else 0.0,
              "max_score": t["points"], "output": t["message"] or "passed",
              "visibility": "after_published" if t["hidden"] else "visible"} for t in graded["tests"]]
    out = {"score": graded["points"], "tests": tests}
    if graded["reason"]:
        out["output"] = graded["reason"]
    return out
