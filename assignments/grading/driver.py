"""Run a notebook in a runner (runner.py) and judge its answers, as data, outside it.

Used by ``scripts/assignments.py grade`` (each runner inside bubblewrap) and by the
Gradescope autograder (``gradescope.py``, each runner as ``nobody``). This module never
runs notebook code itself: it starts a runner, sends it the cells and, one by one, the
tests, reads its JSON lines (linearly, with a cap), enforces the time limits by killing the
process, starts it again without the cell that ended or stalled it, and takes the verdict
by comparing each test's answers with the reference's (``judge_run``).
"""
from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from grading import probes

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


def test_cases(source: str) -> list[dict]:
    """(name, points, hidden) of every test case of an otter test file, in order."""
    return probes.test_cases(source)


class Tampering(Exception):
    pass


class Unguarded(RuntimeError):
    """The runner could not put in a guard it relies on (no seccomp filter against the
    notebook's signal handlers on this machine): nothing is graded (fail closed)."""


class OverQuota(Exception):
    """A runner used more of a resource than its quota (``watch`` says which): it is
    stopped, what it wrote is removed, and the cell or test that ran costs only itself."""


LOG_KEEP_BYTES = 1 << 20          # what the notebook printed: the start is kept
CHANNEL_MAX_BYTES = 64 << 20      # everything a runner may send in one run
RESTART_SLACK_S = 10.0


def plan_tests(payload) -> list[dict]:
    """The test commands of an assignment, in order: each question's tests with the
    reference code of the questions before it (``fixtures``: what its tests bind to
    earlier questions' names) and nothing of its own."""
    plan, order = [], list(payload["questions"])
    for qi, (q, spec) in enumerate(payload["questions"].items()):
        earlier = order[:qi]
        fixtures = [payload["solutions"][p] for p in earlier]
        names = [n for p in earlier for n in payload["questions"][p]["graded"]]
        for k, case in enumerate(test_cases(spec["tests"])):
            # only this test's source: the question's other (hidden) tests never reach the
            # process that runs this one
            plan.append({"kind": "test", "question": q, "test": case["test"],
                         "tests": probes.single_test(spec["tests"], case["test"]),
                         "graded": spec["graded"], "fixtures": fixtures, "fixture_names": names,
                         "seed": payload["seed"], "index": qi * 100 + k,
                         "id": f"{q}/{case['test']}", "points": case["points"], "hidden": case["hidden"]})
    return plan


class _Channel:
    """A runner's messages (JSON lines) and its log, read as they come: linear in what it
    sends, with a cap; the log keeps its first ``LOG_KEEP_BYTES``."""

    def __init__(self, proc, log: bytearray, watch=None):
        self.proc, self.log, self.watch = proc, log, watch
        self.buf, self.scan, self.total = bytearray(), 0, 0
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ, "out")
        self.sel.register(proc.stderr, selectors.EVENT_READ, "err")
        self.open = {"out", "err"}

    def message(self, deadline: float):
        """The next message, None at the deadline, or "eof" when the runner's output ends."""
        while True:
            i = self.buf.find(b"\n", self.scan)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                self.scan = 0
                try:
                    msg = json.loads(line)
                except ValueError:
                    raise Tampering("the results channel carried something other than the grader's messages")
                if type(msg) is not dict:
                    raise Tampering("the results channel carried something other than the grader's messages")
                return msg
            self.scan = len(self.buf)
            if "out" not in self.open:
                return "eof"
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if self.watch is not None:
                over = self.watch()
                if over:
                    raise OverQuota(over)
            for key, _ in self.sel.select(timeout=min(left, 1.0 if self.watch is None else 0.1)):
                stream = key.fileobj
                chunk = os.read(stream.fileno(), 1 << 16)
                if not chunk:
                    self.sel.unregister(stream)
                    self.open.discard(key.data)
                elif key.data == "err":
                    keep = LOG_KEEP_BYTES - len(self.log)
                    if keep > 0:
                        self.log += chunk[:keep]
                else:
                    self.total += len(chunk)
                    if self.total > CHANNEL_MAX_BYTES:
                        raise Tampering(f"the results channel carried more than {CHANNEL_MAX_BYTES >> 20} MiB")
                    self.buf += chunk


def run_notebook(command, cells, given, plan, per_test_s: float, env=None, preexec=None,
                 reference: bool = False, watch=None) -> dict:
    """Run ``cells`` once in a runner (``command()``: its argv, inside a sandbox or not) and
    each test of ``plan`` in a process forked from it; returns
    ``{"records": {test id: record}, "cell_errors": [...], "tampered": text, "log": bytes,
    "starts": n, "seconds": {test id: seconds from its command to its answers}}``. A record is ``{"answers", "error"}``: the answers as data, or why none.

    A cell that ends or stalls the runner is skipped at the next start (the cells before it
    count); a test that hangs or ends its process costs that test only (the runner kills
    it); the runner itself is restarted only if it dies, and at most once per cell and test.

    ``watch`` (optional), called ten times a second while the runner works, returns "" or
    why the runner is over a quota (disk written where no file system bounds it); then the
    runner is stopped, ``watch.clean()`` removes what it wrote, and the cell or test that
    ran is skipped or failed with that reason."""
    records, skip, log, seconds = {}, [], bytearray(), {}
    cell_errors, tampered, starts = [], "", 0
    todo = list(plan)
    while True:
        starts += 1
        if starts > len(cells) + len(plan) + 2:
            for t in todo:
                records.setdefault(t["id"], {"answers": [], "error": "Error: the grader gave up on this notebook"})
            break
        proc = subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, env=env, preexec_fn=preexec)
        channel = _Channel(proc, log, watch)
        current_cell, current_test, phase = None, None, "load"
        load_s = per_test_s + RESTART_SLACK_S
        deadline = time.monotonic() + 60 + load_s  # imports, then the first cell
        outcome = None
        try:
            proc.stdin.write((json.dumps({"kind": "load", "cells": cells, "given": given, "skip": skip,
                                          "limit": per_test_s, "reference": reference}) + "\n").encode())
            proc.stdin.flush()
            while outcome is None:
                msg = channel.message(deadline)
                if msg is None or msg == "eof":
                    outcome = "timeout" if msg is None else "eof"
                    break
                kind = msg.get("kind")
                if kind == "tampered":
                    raise Tampering(str(msg.get("detail", ""))[:500])
                if kind == "unguarded" and phase == "load" and current_cell is None:
                    # before any cell: the runner's own word that it cannot guard this machine
                    raise Unguarded(f"the grader cannot run here: {str(msg.get('detail', ''))[:500]}")
                if phase == "load" and kind == "cell":
                    current_cell = msg.get("index")
                    deadline = time.monotonic() + load_s
                elif phase == "load" and kind == "loaded":
                    phase = "tests"
                    cell_errors = [str(e)[:400] for e in msg.get("cell_errors", [])][:200]
                elif phase == "tests" and kind in ("answers", "stopped", "ended") \
                        and current_test is not None and msg.get("test") == current_test["test"]:
                    tid = current_test["id"]
                    if kind == "answers":
                        seconds[tid] = round(time.monotonic() - sent, 2)
                        if msg.get("tampered"):
                            raise Tampering(str(msg["tampered"])[:500])
                        rec = msg.get("record")
                        if tid not in records:
                            records[tid] = _bounded(rec) if _is_record(rec) else {"answers": [], "error": "malformed answers"}
                        continue  # "ended" follows
                    if kind == "stopped":
                        records[tid] = {"answers": [], "error": f"TimeoutError: the test did not finish within "
                                                                f"{per_test_s:g} s; its process was stopped"}
                    elif tid not in records:
                        records[tid] = {"answers": [], "error": "Error: the process running the test ended "
                                                                f"(status {msg.get('status')}) before it answered"}
                    todo.remove(current_test)
                    current_test = None
                else:
                    raise Tampering(f"an unexpected message on the results channel ({str(kind)[:40]!r})")
                if phase == "tests" and current_test is None:
                    if not todo:
                        outcome = "done"
                        break
                    current_test = todo[0]
                    command_line = {k: current_test[k] for k in
                                    ("kind", "question", "test", "tests", "graded", "fixtures",
                                     "fixture_names", "seed", "index")}
                    proc.stdin.write((json.dumps(dict(command_line, limit=per_test_s)) + "\n").encode())
                    proc.stdin.flush()
                    sent = time.monotonic()
                    deadline = time.monotonic() + per_test_s + 2 * RESTART_SLACK_S
        except Tampering as e:
            tampered = str(e) or "tampering detected"
            outcome = "tampered"
        except OverQuota as e:
            outcome, over = "over", str(e)
        except (BrokenPipeError, OSError):
            outcome = "eof"
        finally:
            _kill(proc)
        if outcome in ("done", "tampered"):
            break
        if outcome == "over":
            watch.clean()
            if phase == "tests" and current_test is not None:
                records.setdefault(current_test["id"], {"answers": [], "error": f"Error: {over}"})
                todo.remove(current_test)
                continue
        if phase == "load":
            if current_cell is None or current_cell in skip:
                why = ("the notebook's process did not start" if current_cell is None else
                       "the notebook's process kept ending while its cells ran")
                for t in todo:
                    records[t["id"]] = {"answers": [], "error": f"Error: {why}"}
                break
            skip.append(current_cell)
            continue
        if current_test is not None:  # the runner itself died or stalled during a test
            records.setdefault(current_test["id"], {"answers": [], "error": "Error: the process running "
                                                                           "the test ended before it answered"})
            todo.remove(current_test)
    return {"records": records, "cell_errors": cell_errors, "tampered": tampered,
            "log": bytes(log), "starts": starts, "seconds": seconds}


RECORD_MAX_BYTES = 4 << 20   # one test's answers as they came
ERROR_MAX_CHARS = 2000       # one test's error text


def _bounded(rec: dict) -> dict:
    """A test's record cut to what a grade and its feedback need: whatever the notebook's
    process sent (its messages can be forged), the feedback stays small."""
    if len(json.dumps(rec)) > RECORD_MAX_BYTES:
        return {"answers": [], "error": f"the answers are larger than {RECORD_MAX_BYTES >> 20} MiB"}
    out = {"answers": rec["answers"], "error": rec.get("error")}
    if out["error"] is not None:
        out["error"] = out["error"][:ERROR_MAX_CHARS]
    for a in out["answers"]:
        if type(a) is dict:
            for field in ("msg", "error", "key"):
                if type(a.get(field)) is str:
                    a[field] = a[field][:ERROR_MAX_CHARS]
    return out


def _is_record(rec) -> bool:
    return (type(rec) is dict and type(rec.get("answers")) is list
            and (rec.get("error") is None or type(rec.get("error")) is str))


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            stream.close()
        except (OSError, BrokenPipeError):
            pass
    proc.wait()


# The reference's own time limit per test: at least this, whatever the students' limit,
# so that the expected answers do not depend on how busy the machine is while it runs.
REFERENCE_MIN_LIMIT_S = 60.0


def reference_records(payload, command, per_test_s: float, env=None, preexec=None) -> dict:
    """The reference solution run as a notebook in a runner of its own: its records, which
    must all pass their own checks (the grader's expected answers). Each test may take up
    to ``max(per_test_s, REFERENCE_MIN_LIMIT_S)``; one that took longer than the students'
    ``per_test_s`` is named on stderr (a correct answer may run out of time there)."""
    limit = max(per_test_s, REFERENCE_MIN_LIMIT_S)
    run = run_notebook(command, payload["reference"], payload["given"], plan_tests(payload), limit,
                       env=env, preexec=preexec, reference=True)
    bad = run["tampered"] or "; ".join(probes.reference_problems(run["records"]))[:2000]
    if bad or run["cell_errors"]:
        raise RuntimeError(f"the reference solution fails its own tests: {bad or run['cell_errors']}")
    slow = {tid: s for tid, s in run["seconds"].items() if s > per_test_s}
    if slow:
        named = ", ".join(f"{tid} {s:g} s" for tid, s in sorted(slow.items()))
        print(f"grader: the reference took longer than the time limit of {per_test_s:g} s on "
              f"{named}: a correct submission may run out of time there (a busy machine, or "
              f"a limit to raise)", file=sys.stderr, flush=True)
    return run["records"]


def judge_run(payload, run: dict, reference: dict) -> dict:
    """The grade, from a notebook's answers and the reference's (data only): returns
    {"points", "max_points", "reason", "tests": [...], "cell_errors": [...]}."""
    from minigrad import testing

    tests = []
    for t in plan_tests(payload):
        rec = run["records"].get(t["id"], {"answers": [], "error": "the test did not run"})
        why = rec.get("error")
        if not why:
            try:
                judged = testing.judge(rec["answers"], reference[t["id"]]["answers"])
            except Exception as e:  # noqa: BLE001 - answers the judge cannot read are wrong answers
                judged = f"the answers could not be read ({type(e).__name__})"
            why = f"AssertionError: {judged}" if judged else ""
        tests.append({"question": t["question"], "test": t["test"], "points": t["points"],
                      "hidden": t["hidden"], "passed": not why, "message": why or ""})
    max_points = _max(payload)
    if run["tampered"]:
        for t in tests:
            t["passed"] = False
        return {"points": 0.0, "max_points": max_points, "reason": f"tampering detected: {run['tampered']}",
                "tests": tests, "cell_errors": run["cell_errors"]}
    points = sum(t["points"] for t in tests if t["passed"])
    reason = ""
    if points == 0 and tests:
        first = next((t for t in tests if t["message"]), None)
        reason = "no test passed" + (f" (first failure: {first['question']} {first['test']}: "
                                     f"{first['message'].splitlines()[-1][:200]})" if first else "")
    return {"points": points, "max_points": max_points, "reason": reason, "tests": tests,
            "cell_errors": run["cell_errors"]}


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
