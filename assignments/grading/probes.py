"""One test of an assignment, run as a *probe*: it returns the answers it recorded, as data.

An assignment's master notebook (``assignments/<name>/<name>.ipynb``) holds, between otter's
raw markers, each question's solution cells and test cells. :func:`master_parts` splits it
into what the grader needs:

- ``given``: the handed-out code every student has (imports, helper functions and classes,
  outside the questions): re-run in a namespace of its own where a submission is graded, so
  a redefined helper cannot fake a measurement;
- ``solutions``: each question's reference code;
- ``questions``: each question's graded names and its tests (otter's test-file format).

A test calls ``minigrad.testing.assert_answer`` for each answer it checks. :func:`run_probe`
runs it under ``minigrad.testing.recording`` and returns ``{"answers": [...], "error": ...}``;
the verdict is ``minigrad.testing.judge(student, reference)``, taken in another process.
"""
from __future__ import annotations

import ast
import functools
import inspect
import re
import threading
import traceback

QUESTION = re.compile(r"name:\s*(\S+)")
CONFIG = re.compile(r'^""" # BEGIN TEST CONFIG\n(.*?)""" # END TEST CONFIG\n', re.DOTALL)
MAGIC = re.compile(r"^\s*[%!]")


def _source(cell) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


def _strip_solution_markers(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines()
                     if ln.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION"))


def test_file(cells: list[str], question: str) -> str:
    """The test cells of one question as an otter test file: each test function with its
    ``@test_case(points=..., hidden=...)``; calls at the top level are dropped."""
    parts = ["from otter.test_files import test_case", "", f'name = "{question}"', ""]
    for text in cells:
        m = CONFIG.match(text)
        config = dict(ln.split(":", 1) for ln in (m.group(1) if m else "").strip().splitlines() if ":" in ln)
        points = float(config.get("points", "1").strip())
        hidden = config.get("hidden", "false").strip().lower() == "true"
        body = text[m.end():] if m else text
        tree = ast.parse(body)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                seg = ast.get_source_segment(body, node)
                points_text = f"{points:g}"
                parts += [f"@test_case(points={points_text}, hidden={hidden})", seg, ""]
    return "\n".join(parts)


def master_parts(nb) -> dict:
    """``{"given": [cells], "solutions": {q: text}, "questions": {q: {"graded": [...],
    "tests": text}}, "order": [q, ...]}`` from a master notebook's JSON (a dict)."""
    given, solutions, questions, order = [], {}, {}, []
    question, inside_solution, inside_tests, tests = None, False, False, []
    first_code = True
    for cell in nb["cells"]:
        kind, text = cell.get("cell_type"), _source(cell)
        stripped = text.strip()
        if kind == "raw":
            if stripped.startswith("# BEGIN QUESTION"):
                question = QUESTION.search(stripped).group(1)
                order.append(question)
                solutions[question], tests = "", []
                questions[question] = {"graded": []}
            elif stripped == "# END QUESTION":
                questions[question]["tests"] = test_file(tests, question)
                question = None
            elif stripped == "# BEGIN SOLUTION":
                inside_solution = True
            elif stripped == "# END SOLUTION":
                inside_solution = False
            elif stripped == "# BEGIN TESTS":
                inside_tests = True
            elif stripped == "# END TESTS":
                inside_tests = False
            continue
        if kind != "code":
            continue
        if first_code:
            first_code = False
            if "otter.Notebook" in text or "ASSIGNMENT =" in text:
                continue
        if inside_tests:
            tests.append(text)
        elif inside_solution and question:
            code = _strip_solution_markers(text)
            solutions[question] += code + "\n\n"
            for node in ast.parse(code).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    questions[question]["graded"].append(node.name)
                elif isinstance(node, ast.Assign):
                    questions[question]["graded"] += [t.id for t in node.targets if isinstance(t, ast.Name)]
        else:
            given.append(text)
    for q in questions:
        questions[q]["graded"] = sorted(set(questions[q]["graded"]))
    tainted = {n for spec in questions.values() for n in spec["graded"]}
    given = [given_definitions(text, tainted) for text in given]
    return {"given": [g for g in given if g.strip()], "solutions": solutions,
            "questions": questions, "order": order}


def given_definitions(text: str, tainted: set | None = None) -> str:
    """What a handed-out cell defines: its imports, functions, classes and the assignments
    that use no graded name (nothing that runs a student's answer). ``tainted`` (the graded
    names) grows by the names assigned from them, so later cells skip those too."""
    tainted = set() if tainted is None else tainted
    kept = "\n".join(ln for ln in text.splitlines() if not MAGIC.match(ln))
    try:
        tree = ast.parse(kept)
    except SyntaxError:
        return ""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            out.append(ast.get_source_segment(kept, node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} if node.value else set()
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if used & tainted:
                tainted |= names
            else:
                out.append(ast.get_source_segment(kept, node))
        else:  # loops and other statements: what they bind is not handed out
            tainted |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return "\n\n".join(out)


def test_cases(source: str) -> list[dict]:
    """``{"test", "points", "hidden"}`` of every test of an otter test file, in order."""
    found = re.findall(r"@test_case\(points=([\d.]+), hidden=(True|False).*?\)\ndef (\w+)\(", source, re.DOTALL)
    return [{"test": fn, "points": float(p), "hidden": h == "True"} for p, h, fn in found]


_PARSING = threading.Lock()  # CPython 3.11's parser is not safe in two threads at once


@functools.lru_cache(maxsize=256)
def single_test(source: str, name: str) -> str:
    """The test file ``source`` reduced to the one test function ``name`` (with its
    decorator): what a process that runs only that test needs."""
    with _PARSING:
        tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            deco = "".join(f"@{ast.get_source_segment(source, d)}\n" for d in node.decorator_list)
            return deco + ast.get_source_segment(source, node) + "\n"
    raise KeyError(f"no test {name}")


def load_tests(source: str, name: str, trust=None) -> dict:
    """Compile a question's test file; returns ``{test name: function}``."""
    found = {}

    def test_case(points=1, hidden=False, **_):
        def register(fn):
            found[fn.__name__] = fn
            return fn
        return register

    ns = {"__name__": f"tests_{name}", "test_case": test_case}
    source = source.replace("from otter.test_files import test_case", "")
    code = compile(source, f"tests/{name}.py", "exec")
    if trust is not None:
        trust(code)
    exec(code, ns)
    return found


def question_env(student: dict, given: dict, fixtures: dict, graded: list[str]) -> dict:
    """The names a question's tests see, bound in the submission's namespace too (so its
    functions find them as globals): the question's own graded names are the submission's;
    the handed-out helpers are the handout's (``given``); earlier questions' graded names
    are the reference's (``fixtures``), so one mistake costs points once."""
    for name, value in given.items():
        if not name.startswith("__") and name not in graded:
            student[name] = value
    for name, value in fixtures.items():
        if not name.startswith("__") and name not in graded:
            student[name] = value
    return student


def run_probe(test, env: dict, seed, stop=()) -> dict:
    """Run one test function with its arguments taken from ``env`` by name (``seed``: the
    instructor's seed); returns ``{"answers": [...], "error": text or None}``. Exceptions of
    the types in ``stop`` (the runner's time limit) propagate."""
    from minigrad import testing

    args, missing = [], []
    for p in inspect.signature(test).parameters.values():
        if p.name == "seed":
            args.append(seed)
        elif p.name in env:
            args.append(env[p.name])
        elif p.default is not inspect.Parameter.empty:
            args.append(p.default)
        else:
            missing.append(p.name)
    if missing:
        return {"answers": [], "error": f"NameError: {', '.join(missing)} is not defined in your notebook"}
    error = None
    with testing.recording() as rec:
        try:
            test(*args)
        except stop:
            raise
        except AssertionError as e:
            error = f"AssertionError: {str(e)[:1500]}"
        except BaseException as e:  # noqa: BLE001 - whatever the code under test raises
            error = "".join(traceback.format_exception_only(type(e), e)).strip()[:1500]
    return {"answers": rec.answers, "error": error}


def reset_random(seed, k: int) -> None:
    """The same random state before test ``k`` wherever it runs (the submission's cells and
    the reference's draw different numbers before it)."""
    import numpy as np

    import minigrad

    minigrad.random.manual_seed((int(seed or 0) * 1009 + k) & 0x7FFFFFFF)
    np.random.seed((int(seed or 0) * 7919 + k) & 0x7FFFFFFF)


def exec_cells(cells, ns: dict, where: str, trust=None) -> None:
    """Run grader-side code (handout, reference); ``trust(code)`` is told of each piece."""
    for i, text in enumerate(cells):
        code = compile(text, f"<{where} {i}>", "exec")
        if trust is not None:
            trust(code)
        exec(code, ns)


def given_namespace(parts) -> dict:
    ns = {"__name__": "__main__"}
    exec_cells(parts["given"], ns, "handout")
    return ns


def fixtures_for(parts, question: str, given: dict) -> dict:
    """The reference's graded names of the questions before ``question`` (nothing else)."""
    order = parts["order"]
    earlier = order[:order.index(question)]
    if not earlier:
        return {}
    ns = dict(given)
    exec_cells([parts["solutions"][q] for q in earlier], ns, "reference")
    return {name: ns[name] for q in earlier for name in parts["questions"][q]["graded"] if name in ns}


def probe_question(parts, question: str, student: dict, seed, given: dict | None = None) -> dict:
    """Every test of ``question`` run in this process on ``student`` (a namespace where the
    submission ran): ``{test name: {"answers", "error"}}``. For development and the mutation
    suite; the grader runs each test in a process of its own (runner.py)."""
    given = given_namespace(parts) if given is None else given
    spec = parts["questions"][question]
    env = question_env(student, given, fixtures_for(parts, question, given), spec["graded"])
    tests = load_tests(spec["tests"], question)
    out = {}
    for k, case in enumerate(test_cases(spec["tests"])):
        reset_random(seed, parts["order"].index(question) * 100 + k)
        out[case["test"]] = run_probe(tests[case["test"]], env, seed)
    return out


def points_lost(parts, question: str, got: dict, want: dict) -> tuple[float, dict]:
    """Points of ``question`` that ``got`` loses against the reference records ``want``,
    and the reason per failed test."""
    from minigrad import testing

    lost, why = 0.0, {}
    for case in test_cases(parts["questions"][question]["tests"]):
        g, w = got[case["test"]], want[case["test"]]
        reason = g["error"] or testing.judge(g["answers"], w["answers"])
        if reason:
            lost += case["points"]
            why[case["test"]] = reason
    return lost, why


def reference_problems(records: dict) -> list[str]:
    """Why the reference fails its own tests (an empty list when it passes them all)."""
    bad = []
    for name, rec in records.items():
        if rec["error"]:
            bad.append(f"{name}: {rec['error']}")
        bad += [f"{name}: {a['key']}: {a['msg']} (the reference's answer is not the expected one)"
                for a in rec["answers"] if not a.get("ok")]
    return bad
