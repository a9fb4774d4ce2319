"""Run one submission's tests in a fresh interpreter (inside the sandbox).

Usage (scripts/assignments.py starts it, one process per submission, in bubblewrap; after a
test that hangs or ends the process, a new one for the tests left):

    python -I runner.py SCRATCH CELL_LIMIT_SECONDS

Order of events, which is the point of this file:

1. Import the grader's own NumPy, minigrad and ``grading.kit`` and fingerprint every
   function and class they hold (``Fingerprint``) **before** any student code runs.
2. Run the submission's code cells (``SCRATCH/student.json``, exported by the driver from
   the notebook), each under a time limit, in a namespace of their own. Everything they
   print goes to ``SCRATCH/log-QUESTION.txt``, not to the driver.
3. Check the fingerprints; say ``loaded`` to the driver on the results channel (the
   process's original stdout, JSON lines).
4. Only now read the payload from stdin: the reference solution's cells, every
   question's tests (public and hidden), the seed the instructor built with, a token. Hidden tests
   therefore exist nowhere the submission's import-time code could read them.
5. Run the reference solution in its own namespace. A question's tests see the
   student's version of *that question's* graded names only; every other name (other questions' answers,
   the notebook's helpers such as ``gradients`` or ``make_chain``) is the reference's, so
   one bug costs points once and a redefined helper cannot fake a measurement.
6. Run each test under a time limit; after each, check the fingerprints again (a patched
   minigrad, NumPy, grader or otter scores the whole submission 0); report the result
   with the token (a result line without it is a forgery).
"""
from __future__ import annotations

import builtins
import inspect
import json
import os
import signal
import sys
import time
import traceback
import types

LIB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if sys.path[0] != LIB:
    sys.path.insert(0, LIB)

import numpy  # noqa: E402
import numpy.testing  # noqa: E402,F401

import minigrad  # noqa: E402
import minigrad.plan  # noqa: E402,F401
from grading import kit  # noqa: E402

CELL_LIMIT_S = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0


class TimeLimit(BaseException):
    """Raised in the main thread when a cell or a test runs past its time limit."""


def _code_of(value):
    for v in (value, getattr(value, "__func__", None), getattr(value, "fget", None)):
        code = getattr(v, "__code__", None)
        if code is not None:
            return v, code
    return None, None


class Fingerprint:
    """Identity of every callable and class (and each class's methods) of some modules.

    Replacing a function, a method or a function's ``__code__`` changes the fingerprint;
    ordinary state (counters, RNG state, the ledger's records) does not."""

    def __init__(self, modules):
        self.modules = list(modules)
        self.state = self._take()

    def _entries(self, mod):
        own = getattr(mod, "__name__", "")
        for attr, value in list(vars(mod).items()):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type,
                                  types.ModuleType, staticmethod, classmethod, property)) \
                    or callable(value):
                yield f"{own}.{attr}", value
                if isinstance(value, type) and value.__module__ == own:
                    for k, v in list(vars(value).items()):
                        if not k.startswith("__") or k in ("__call__", "__init__", "__new__"):
                            yield f"{own}.{attr}.{k}", v

    def _take(self):
        state = {}
        for mod in self.modules:
            state[f"sys.modules[{mod.__name__!r}]"] = (id(sys.modules.get(mod.__name__)), None)
            for key, value in self._entries(mod):
                fn, code = _code_of(value)
                state[key] = (id(value), id(code) if code is not None else None,
                              id(getattr(fn, "__defaults__", None)) if fn is not None else None)
        return state

    def changed(self) -> list[str]:
        now = self._take()  # attributes added since (NumPy's lazy submodules) are no threat
        return sorted(k for k in self.state if self.state[k] != now.get(k))


def otter_patched() -> list[str]:
    """otter, if the submission imported it: every function its modules and classes hold
    must come from otter's own files (a replaced ``ExceptionTestFile.run`` does not)."""
    bad = []
    for name, mod in list(sys.modules.items()):
        if not (name == "otter" or name.startswith("otter.")) or mod is None:
            continue
        home = os.path.dirname(getattr(sys.modules.get("otter"), "__file__", "") or "")
        allowed = tuple(p for p in [home, sys.base_prefix, sys.prefix, *[q for q in sys.path if "-packages" in q]] if p)
        values = list(vars(mod).items())
        for attr, value in values:
            items = [(f"{name}.{attr}", value)]
            if isinstance(value, type) and value.__module__.startswith("otter"):
                items += [(f"{name}.{attr}.{k}", v) for k, v in vars(value).items()]
            for key, v in items:
                fn, code = _code_of(v)
                if code is None or not home or code.co_filename.startswith(allowed + ("<frozen ",)):
                    continue
                # dataclasses and namedtuples make methods from strings; a replacement made
                # by a submission has another name than the attribute it replaces
                if code.co_filename == "<string>" and getattr(fn, "__qualname__", "").endswith(key.split(".")[-1]) \
                        and "." in getattr(fn, "__qualname__", ""):
                    continue
                bad.append(f"{key} (defined in {code.co_filename})")
    return sorted(set(bad))


def main() -> None:
    scratch = sys.argv[1]
    # Everything below is bound to local names now, before student code runs: a
    # submission that replaces these module globals or builtins changes nothing here.
    _write, _read, _dumps, _loads, _monotonic = os.write, os.read, json.dumps, json.loads, time.monotonic
    _exec, _compile, _isinstance, _len, _str, _type = exec, compile, isinstance, len, str, type
    _setitimer, _format_exc = signal.setitimer, traceback.format_exception_only
    out = os.dup(1)
    log = os.open(os.path.join(scratch, "log.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    inp = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)

    guarded = [numpy, numpy.testing, builtins, kit]
    guarded += [m for n, m in sorted(sys.modules.items()) if m is not None and (n == "minigrad" or n.startswith("minigrad."))]
    guarded += [sys.modules[__name__]]
    fingerprint = Fingerprint(guarded)
    changed, changed_code = fingerprint.changed, Fingerprint.changed.__code__
    patched_otter, patched_otter_code = otter_patched, otter_patched.__code__

    _flush_out, _flush_err = sys.stdout.flush, sys.stderr.flush

    def emit(**msg):
        for flush in (_flush_out, _flush_err):
            try:
                flush()
            except BaseException:
                pass
        _write(out, (_dumps(msg) + "\n").encode())

    def tampering() -> str:
        if Fingerprint.changed.__code__ is not changed_code or otter_patched.__code__ is not patched_otter_code:
            return "the grader's integrity check itself was replaced"
        found = changed()[:3] + patched_otter()[:3]
        if sys.gettrace() is not None or sys.getprofile() is not None:
            found.append("a trace or profile function was installed (sys.settrace/setprofile)")
        return "; ".join(found)

    def on_alarm(signum, frame):
        raise TimeLimit()

    signal.signal(signal.SIGALRM, on_alarm)

    def run_cells(cells, ns, where):
        errors = []
        for cell in cells:
            try:
                code = _compile(cell["source"], f"<{where} cell {cell['index']}>", "exec")
            except SyntaxError as e:
                errors.append(f"cell {cell['index']}: SyntaxError: {e.msg} (line {e.lineno})")
                continue
            _setitimer(signal.ITIMER_REAL, CELL_LIMIT_S)
            try:
                _exec(code, ns)
            except TimeLimit:
                errors.append(f"cell {cell['index']}: stopped after {CELL_LIMIT_S:g} s (time limit of a cell)")
            except BaseException as e:  # SystemExit and KeyboardInterrupt included: go on
                errors.append(f"cell {cell['index']}: {''.join(_format_exc(_type(e), e)).strip()[:300]}")
            finally:
                _setitimer(signal.ITIMER_REAL, 0)
        return errors

    # 2. the submission
    with open(os.path.join(scratch, "student.json")) as f:
        student_cells = json.load(f)
    student = {"__name__": "__main__", "__builtins__": builtins}
    load_errors = run_cells(student_cells, student, "your")
    problem = tampering()
    if problem:
        emit(kind="tampered", detail=problem)
        os._exit(0)
    # 3.-4. only now the payload (the process cannot see it before)
    emit(kind="loaded", cell_errors=load_errors)
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = _read(inp, 1 << 20)
        if not chunk:
            break
        buf += chunk
    payload = _loads(buf.decode())
    token, seed = payload["token"], payload["seed"]
    # 5. the reference, and the namespace the tests see
    reference = {"__name__": "__main__", "__builtins__": builtins}
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # what the reference prints is nobody's business
    ref_errors = run_cells(payload["reference"], reference, "reference")
    _flush_out()
    os.dup2(log, 1)
    if ref_errors:
        emit(kind="error", token=token, detail="the reference solution failed: " + "; ".join(ref_errors))
        os._exit(0)
    original = dict(student)
    skip = set(payload.get("skip", []))
    limit = float(payload["per_test_s"])
    # 6. the tests, question by question
    for question, spec in payload["questions"].items():
        graded = set(spec["graded"])
        # The student's functions find these in their globals: this question's own names are
        # the student's, everything else the reference defines is the reference's.
        for name, value in reference.items():
            if name.startswith("__"):
                continue
            if name not in graded:
                student[name] = value
            elif name in original:
                student[name] = original[name]
            else:
                student.pop(name, None)
        env = student
        cases = []

        def test_case(points=1, hidden=False, **_):
            def register(fn):
                cases.append((fn, points, hidden))
                return fn
            return register

        test_ns = {"__name__": f"tests_{question}", "test_case": test_case}
        source = spec["tests"].replace("from otter.test_files import test_case", "")
        _exec(_compile(source, f"tests/{question}.py", "exec"), test_ns)
        for fn, points, hidden in cases:
            name = fn.__name__
            test_id = f"{question}/{name}"
            if test_id in skip:
                continue
            emit(kind="start", token=token, test=test_id)
            args, missing = [], []
            for p in inspect.signature(fn).parameters.values():
                if p.name == "seed":
                    args.append(seed)
                elif p.name.startswith("ref_") and p.name[4:] in reference:
                    args.append(reference[p.name[4:]])
                elif p.name in env:
                    args.append(env[p.name])
                elif p.default is not inspect.Parameter.empty:
                    args.append(p.default)
                else:
                    missing.append(p.name)
            start = _monotonic()
            passed, message = False, ""
            if missing:
                message = f"NameError: {', '.join(missing)} is not defined in your notebook"
            else:
                _setitimer(signal.ITIMER_REAL, limit)
                try:
                    fn(*args)
                    passed = True
                except TimeLimit:
                    message = f"TimeoutError: the test ran past its time limit of {limit:g} s"
                except AssertionError as e:
                    message = f"AssertionError: {_str(e)[:1500]}"
                except BaseException as e:
                    message = "".join(_format_exc(_type(e), e)).strip()[:1500]
                finally:
                    _setitimer(signal.ITIMER_REAL, 0)
            problem = tampering()
            if problem:
                emit(kind="tampered", token=token, detail=problem)
                os._exit(0)
            emit(kind="result", token=token, test=test_id, points=points, hidden=hidden, passed=passed,
                 message=message, seconds=round(_monotonic() - start, 3))
    emit(kind="done", token=token)
    os._exit(0)


if __name__ == "__main__":
    main()
