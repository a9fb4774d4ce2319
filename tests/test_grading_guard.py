"""assignments/grading/runner.py's watch on the namespaces of the modules it guards: PEP
509's dict version tag, read with ctypes (``dict_tag_reader``), and ``NamespaceTags``,
which sees a module patched past its guarded class and put back at once."""
from __future__ import annotations

import ast
import glob
import json
import subprocess
import sys
import types

import pytest

from bookpaths import ROOT

sys.path.insert(0, str(ROOT / "assignments"))
from grading import runner  # noqa: E402

RUNNER = ROOT / "assignments" / "grading" / "runner.py"
HAS_TAG = sys.implementation.name == "cpython" and (3, 6) <= sys.version_info[:2] <= (3, 13) \
    and sys.maxsize > 2 ** 32
HARNESS_ENV = {"PYTHONPATH": f"{ROOT / 'assignments'}:{ROOT}", "PATH": "/usr/bin:/bin"}


def run_harness(code: str, timeout: int = 120):
    """Run ``code`` in a fresh Python with the grader importable; its last line of output,
    parsed as JSON."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=HARNESS_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not HAS_TAG, reason="a 64-bit CPython 3.6 to 3.13 has the tag")
def test_the_tag_moves_with_every_change_of_a_dict_and_only_then():
    view, why = runner.dict_tag_reader()
    assert view is not None, why
    d: dict = {}
    tag = view(d)
    seen = [tag.value]
    for change in (lambda: d.__setitem__("a", 1), lambda: d.__setitem__("a", 2), lambda: d.pop("a"),
                   lambda: d.update(b=[]), lambda: d.setdefault("c", 3), d.clear):
        change()
        assert tag.value not in seen, "a change of the dict left its tag as it was"
        seen.append(tag.value)
    d["x"] = obj = object()
    before = tag.value
    d["x"] = obj  # the same object again: nothing changed
    len(d), d.get("x"), list(d.items())
    assert tag.value == before, "reading a dict moved its tag"


def test_a_layout_that_is_not_the_tag_is_refused_and_said_so():
    for offset in (8, 16, 32, 40):
        view, why = runner.dict_tag_reader(offset)
        assert view is None and "dict version tag" in why, (offset, why)


def _reader_source() -> str:
    """dict_tag_reader's source, to run on other interpreters without NumPy or minigrad."""
    tree = ast.parse(RUNNER.read_text())
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "dict_tag_reader"
            or isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DICT_TAG_OFFSET"]
    return "import sys\n" + "\n".join(ast.get_source_segment(RUNNER.read_text(), n) for n in body)


# This one, the system's (the image's, as on Gradescope) and, where pyenv has them, Ubuntu
# 22.04's and 24.04's versions and the newest with the tag.
PYTHONS = sorted(set(glob.glob("/usr/bin/python3") + [p for v in ("3.10", "3.12", "3.13")
                                                     for p in glob.glob(f"/root/.pyenv/versions/{v}.*/bin/python3")])
                 | {sys.executable})


@pytest.mark.parametrize("python", PYTHONS)
def test_each_python_here_has_the_tag_or_says_why_not(python):
    """Every interpreter on this machine: CPython 3.8 to 3.13 read the tag; any other says
    why not, in one line, and nothing crashes."""
    probe = _reader_source() + "\nview, why = dict_tag_reader()\nprint(sys.version_info[:2], view is not None, why)"
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    version = tuple(int(x) for x in out.stdout.split(")")[0].strip("(").split(","))
    works = out.stdout.split(")")[1].split()[0] == "True"
    if (3, 8) <= version <= (3, 13):
        assert works, out.stdout
    else:
        assert works or "dict version tag" in out.stdout or "not" in out.stdout, out.stdout


def _guarded(source: str, name: str = "victim") -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    object.__setattr__(mod, "__class__", runner.GuardedModule)
    return mod


@pytest.fixture
def view():
    view, why = runner.dict_tag_reader()
    if view is None:
        pytest.skip(why)
    return view


def test_a_patch_past_the_guard_put_back_at_once_is_seen(view):
    """Through a function's __globals__, object.__setattr__, types.ModuleType.__setattr__,
    the raw __dict__: each patch, undone at once, leaves the module named; a write made
    between ``before`` and ``after`` (as the audit hook makes the guarded class's) does not."""
    raw = types.ModuleType.__dict__["__dict__"].__get__
    routes = {"__globals__": lambda m, v: m.g.__globals__.__setitem__("f", v),
              "object.__setattr__": lambda m, v: object.__setattr__(m, "f", v),
              "types.ModuleType.__setattr__": lambda m, v: types.ModuleType.__setattr__(m, "f", v),
              "raw __dict__": lambda m, v: raw(m).__setitem__("f", v)}
    for route, write in routes.items():
        mod = _guarded("def f():\n    return 1\ndef g():\n    return f()\n", f"victim_{route}")
        tags = runner.NamespaceTags(view)
        tags.install([mod])
        namespace = runner._MODULE_DICT(mod)
        tags.before(namespace)
        namespace["count"] = 1  # a write the hook makes: expected
        tags.after(namespace)
        assert tags.problems() == [], route
        original = mod.f
        write(mod, lambda: 2)
        assert mod.g() == 2, f"{route}: the patch did not take"
        write(mod, original)
        assert mod.f is original
        assert tags.problems() == [f"victim_{route}"], route


def test_a_patch_before_a_permitted_write_stays_seen(view):
    mod = _guarded("def f():\n    return 1\n")
    tags = runner.NamespaceTags(view)
    tags.install([mod])
    original, namespace = mod.f, mod.f.__globals__
    namespace["f"] = len
    namespace["f"] = original
    tags.before(namespace)  # the hook's own write next must not make the earlier one expected
    namespace["count"] = 2
    tags.after(namespace)
    assert tags.problems() == ["victim"]


def test_a_module_whose_own_code_rebinds_a_name_is_held_to_the_other_names(view):
    mod = _guarded("N = 0\ndef bump():\n    global N\n    N += 1\ndef f():\n    return 1\n")
    tags = runner.NamespaceTags(view)
    tags.install([mod])
    assert tags.entries[id(runner._MODULE_DICT(mod))][4] == {"N"}
    mod.bump()
    mod.bump()
    assert tags.problems() == []
    runner._MODULE_DICT(mod)["f"] = len  # another name: seen while it is changed
    assert tags.problems() == ["victim"]


HARNESS = r"""
import json, sys, types
from grading import runner as R
raw = types.ModuleType.__dict__["__dict__"].__get__
def fresh(name):
    m = types.ModuleType(name)
    exec("def f():\n    return 1\ndef g():\n    return f()\nN = 1\n", m.__dict__)
    return m
mods = {k: fresh(f"minigrad.victim_{k}") for k in ("trusted", "refused", "globals", "object",
                                                  "moduletype", "raw", "event", "guard")}
runner_module = sys.modules["grading.runner"]
for m in list(mods.values()) + [runner_module]:
    object.__setattr__(m, "__class__", R.GuardedModule)
tags = R.NamespaceTags(*R.dict_tag_reader())
tags.install(list(mods.values()) + [runner_module], classes=R.grader_classes([runner_module]))
refused = []
enter, leave, trust, answers = R.make_guard(R.trusted_codes(), {}, tags=tags, refused_writes=refused)
out = {}
m = mods["trusted"]
m.N, m.f = 2, len  # the grader's own writes
out["trusted"] = tags.problems()
cell = '''
def refused_setattr(m):
    m.f = len
def rawpatch(how, m):
    original = m.f
    write = {"globals": lambda v: m.g.__globals__.__setitem__("f", v),
             "object": lambda v: object.__setattr__(m, "f", v),
             "moduletype": lambda v: types.ModuleType.__setattr__(m, "f", v),
             "raw": lambda v: raw(m).__setitem__("f", v)}[how]
    write(lambda: 2)
    took = m.g() == 2
    write(original)
    return took
def fake_event(m):
    sys.audit("grading.module_write", m, "f", len, [])
def guard_off(m):
    guard = type(m).__setattr__.__globals__
    saved, original = guard["_audit"], m.f
    guard["_audit"] = lambda *a: None
    try:
        m.f = len
        m.f = original
    finally:
        guard["_audit"] = saved
def blind():
    R.Fingerprint._take = lambda self: self.state  # the grader's own class, patched
    del R.Fingerprint._take
def plain(m):
    m.N = 3
def view(m):
    return type(m.__dict__).__name__
'''
ns = {"types": types, "raw": raw, "sys": sys, "R": R}
exec(compile(cell, "<your cell 1>", "exec"), ns)
enter()
for name, call in [("refused", lambda: ns["refused_setattr"](mods["refused"])),
                   ("event", lambda: ns["fake_event"](mods["event"])),
                   ("guard", lambda: ns["guard_off"](mods["guard"]))]:
    try:
        call()
        out[name + "_raised"] = ""
    except Exception as e:
        out[name + "_raised"] = type(e).__name__
out["took"] = {how: ns["rawpatch"](how, mods[how]) for how in ("globals", "object", "moduletype", "raw")}
ns["plain"](mods["trusted"])
try:
    ns["blind"]()
except Exception as e:
    out["blind_raised"] = type(e).__name__
out["view"] = ns["view"](mods["trusted"])
leave()
out["problems"] = sorted(tags.problems())
out["refused"] = refused
print(json.dumps(out))
"""


def test_the_guard_with_its_audit_hook_refuses_or_sees_every_route():
    """The runner's hook and guarded class together (in a process of its own: an audit hook
    stays for good): notebook code's setattr is refused and named; a patch through each
    route is seen, as is switching the guard's own module off for a moment or patching one
    of its classes; a forged write event is refused; the grader's writes and a plain value
    rebound are not tampering."""
    if runner.dict_tag_reader()[0] is None:
        pytest.skip("no dict version tag on this interpreter")
    out = run_harness(HARNESS)
    assert out["trusted"] == [], out
    assert out["refused_raised"] == "RuntimeError" and "minigrad.victim_refused.f" in out["refused"], out
    assert out["event_raised"] == "RuntimeError", out
    assert out["took"] == {"globals": True, "object": True, "moduletype": True, "raw": True}, out
    assert out["view"] == "mappingproxy", out
    assert out["problems"] == sorted(["minigrad.victim_globals", "minigrad.victim_object",
                                      "minigrad.victim_moduletype", "minigrad.victim_raw",
                                      "minigrad.victim_guard", "grading.runner",
                                      "grading.runner.Fingerprint"]), out


def test_minigrad_and_the_grader_rebind_no_module_name_at_run_time():
    """No ``global`` statement in a function of minigrad or the grader: their run-time state
    lives in objects their modules hold, so the version tag of every namespace of theirs
    moves only when something outside them writes it."""
    import minigrad  # noqa: F401
    import minigrad.plan  # noqa: F401
    import minigrad.testing  # noqa: F401

    mods = {name: m for name, m in sys.modules.items()
            if m is not None and name.split(".")[0] in ("minigrad", "grading")}
    names = {id(vars(m)): name for name, m in mods.items()}
    found = runner.global_writers(set(names))
    assert not found, {names[k]: sorted(v) for k, v in found.items()}


LIAR_HARNESS = r"""
import json, sys
import numpy as np
from grading import runner as R
from minigrad.testing import assert_answer, recording
enter, leave, trust, answers = R.make_guard(R.trusted_codes(), {})
cell = '''
ran = []
def expected_seen():
    f = sys._getframe(2)  # refused to notebook code, but not inside the grader's hook
    while f is not None and f.f_code.co_name != "record":
        f = f.f_back
    ran.append(True)
    return f.f_locals["expected"]
class LiarInt(np.int64):
    __module__ = "numpy"
    def __int__(self):
        return int(expected_seen())
class LiarFloat(np.float64):
    __module__ = "numpy"
    def __float__(self):
        return float(expected_seen())
'''
ns = {"np": np, "sys": sys}
exec(compile(cell, "<your cell 1>", "exec"), ns)
enter()
answers(start=True)
with recording():  # the grader's mode: answers recorded, never asserted
    assert_answer("int", ns["LiarInt"](0), 5)
    assert_answer("float", ns["LiarFloat"](0.0), 2.5)
got = answers()
leave()
print(json.dumps({"ran": len(ns["ran"]), "answers": got}))
"""


def test_an_answer_that_claims_to_be_numpy_runs_no_code_in_the_hook():
    """A subclass of a NumPy scalar that says its ``__module__`` is "numpy" is no NumPy
    scalar: ``canonical`` (run inside the grader's audit hook, where every event passes)
    must never call its ``__int__``/``__float__``, which would read the test's expected
    value off the stack (a3's q3 scored full marks from a constant this way)."""
    import numpy as np

    from minigrad.testing import AnswerError, canonical

    class Liar(np.float64):
        __module__ = "numpy"

        def __float__(self):
            raise AssertionError("canonical ran the answer's own __float__")

    with pytest.raises(AnswerError):
        canonical(Liar(1.0))
    assert canonical(np.float16(0.5)) == 0.5 and canonical(np.uint8(3)) == 3
    assert type(canonical(np.longdouble(2))) is float and type(canonical(np.intp(2))) is int
    out = run_harness(LIAR_HARNESS)
    assert out["ran"] == 0
    assert [(a["key"], a["value"], "error" in a) for a in out["answers"]] == \
        [("int", None, True), ("float", None, True)]


STDLIB_HARNESS = r"""
import base64, builtins, json, sys
from grading import runner as R
mods = [m for m in R.guarded_modules() if m is not builtins]
names = {R._MODULE_DICT(m).get("__name__") for m in mods}
R.guard_modules(mods)
tags = R.NamespaceTags(*R.dict_tag_reader())
tags.install([m for m in mods if type(m) is R.GuardedModule] + [builtins])
refused = []
enter, leave, trust, answers = R.make_guard(R.trusted_codes(), {}, tags=tags, refused_writes=refused)
cell = '''
def write(mod, name):
    try:
        setattr(mod, name, lambda *a, **k: None)
        return ""
    except RuntimeError as e:
        return "refused"
def momentary_builtin():
    saved = builtins.len
    builtins.len = lambda x: 0
    builtins.len = saved
'''
ns = {"builtins": builtins}
exec(compile(cell, "<your cell 1>", "exec"), ns)
out = {"guarded": sorted(n for n in names if n in R.STDLIB_GUARDED)}
enter()
out["b64"] = ns["write"](base64, "b64encode")
out["json"] = ns["write"](json, "_default_encoder")
out["problems_before"] = tags.problems()
ns["momentary_builtin"]()
leave()
out["problems"] = tags.problems()
print(json.dumps(out))
"""


def test_the_standard_library_the_hook_calls_and_builtins_are_guarded():
    """What the grader's own code calls while a notebook is graded (inside the audit hook,
    where every event passes, or before its messages go out) cannot be replaced by notebook
    code: base64's encoder (a3 scored 11/18 from no solution by replacing it: the hook ran
    the notebook's function and its answers became the tests' expected values), json's
    (which wiped "tampered" from the messages), os.path's; and a builtin replaced and put
    back at once is seen (builtins' version tag)."""
    if runner.dict_tag_reader()[0] is None:
        pytest.skip("no dict version tag on this interpreter")
    out = run_harness(STDLIB_HARNESS)
    assert {"base64", "json", "os", "posixpath", "binascii"} <= set(out["guarded"]), out
    assert out["b64"] == "refused" and out["json"] == "refused", out
    assert out["problems_before"] == [], out
    assert out["problems"] == ["builtins"], out


def test_canonical_looks_nothing_up_when_it_runs(monkeypatch):
    """`canonical` binds what it calls when minigrad.testing loads: base64's and binascii's
    functions and the builtins, replaced afterwards, are never called."""
    import base64
    import binascii

    import numpy as np

    from minigrad.testing import canonical

    def boom(*args, **kwargs):
        raise AssertionError("canonical called a function looked up when it ran")

    want = canonical([np.arange(3, dtype=np.int16), 2, 0.5, {"a": (True,)}])
    monkeypatch.setattr(base64, "b64encode", boom)
    monkeypatch.setattr(binascii, "b2a_base64", boom)
    monkeypatch.setattr("builtins.list", boom)
    try:
        got = canonical([np.arange(3, dtype=np.int16), 2, 0.5, {"a": (True,)}])
    finally:
        monkeypatch.undo()  # before pytest itself needs list
    assert got == want == [{"__ndarray__": ["<i2", [3], "AAABAAIA"]}, 2, 0.5,
                           {"__dict__": [["a", [True]]]}]


def test_the_channel_codec_runs_nothing_a_notebook_can_replace(monkeypatch):
    """The runner's messages are written with json's C encoder bound when it starts: a
    notebook that replaces ``JSONEncoder.encode`` (a class attribute: no audit event, no
    tag) or ``json._default_encoder`` later cannot rewrite them (it wiped "tampered")."""
    import json.encoder

    dumps, loads = runner.json_codec()

    def scrub(self, o):
        raise AssertionError("the runner's codec ran JSONEncoder.encode")

    monkeypatch.setattr(json.encoder.JSONEncoder, "encode", scrub)
    monkeypatch.setattr(json, "_default_encoder", None)
    monkeypatch.setattr(json, "_default_decoder", None)
    msg = {"kind": "answers", "tampered": "x", "record": {"answers": [1, 0.5, None, True, "é"]}}
    line = dumps(msg)
    monkeypatch.undo()
    assert line == json.dumps(msg)
    assert loads(line.encode()) == msg and loads(line) == msg
    with pytest.raises(ValueError):
        loads(b'{"kind": "test"} {"kind": "x"}')


def test_the_gradescope_runner_has_the_memory_limit_of_make_grade():
    """gradescope.py's runner (as ``nobody``, where this runs as root) gets the address-space
    limit ``make grade``'s sandbox sets: a notebook that allocates past it gets MemoryError."""
    import os
    import shutil
    import tempfile

    from grading import gradescope

    script = ("import resource\n"
              "print(resource.getrlimit(resource.RLIMIT_AS)[0])\n"
              "try:\n    bytearray(17 << 30)\n    print('allocated')\n"
              "except MemoryError:\n    print('MemoryError')\n")
    python = shutil.which("python3", path="/usr/bin") if os.getuid() == 0 else sys.executable
    if python is None:
        pytest.skip("no /usr/bin/python3 that nobody can run")
    with tempfile.TemporaryDirectory(dir="/tmp") as home:  # a folder nobody can enter
        os.chmod(home, 0o777)
        preexec = gradescope._as_nobody(home) if os.getuid() == 0 else gradescope.set_limits
        proc = subprocess.run([python, "-I", "-c", script], capture_output=True, text=True,
                              timeout=60, preexec_fn=preexec, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    limit, outcome = proc.stdout.split()
    assert int(limit) == gradescope.MEMORY_LIMIT_BYTES == 16 << 30
    assert outcome == "MemoryError"


CLASS_HARNESS = r"""
import json, sys
import numpy as np
import minigrad, minigrad.plan, minigrad.testing
from minigrad import Function, Tensor, memory, nn, no_grad, enable_grad
import minigrad.ops as F
from grading import runner as R
mods = [m for n, m in sorted(sys.modules.items()) if m is not None and n.split(".")[0] == "minigrad"]
classes = R.library_classes(mods)
R.prepare_classes(classes)
tags = R.NamespaceTags(*R.dict_tag_reader())
tags.install([], classes=classes)
out = {"classes": len(classes), "has": sorted(c.__qualname__ for c in classes
                                              if c.__qualname__ in ("Tensor", "Tracker", "_Ledger", "Function"))}
# what a correct solution and the tests do: subclass, track, checkpoint, annotations read
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)
        ctx.run = fn
        return out
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        xr = Tensor(x, requires_grad=True)
        with enable_grad():
            y = ctx.run(xr)
        y.backward(grad)
        return xr.grad, None
layers = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(3)]
x = Tensor(minigrad.random.randn(4, 8), requires_grad=True)
def run(h):
    for layer in layers:
        h = layer(h)
    return h
with memory.track() as m:
    F.sum(Checkpoint.apply(x, run) * 2).backward()
import typing, inspect
for c in classes:
    inspect.get_annotations(c)
    repr(c), c.__doc__
out["legit"] = tags.problems()
# a notebook's patch, put back at once (no audit event in CPython 3.11 to 3.13)
for klass, name in ((Tensor, "__mul__"), (memory.Tracker, "_observe"), (memory._Ledger, "_entry")):
    original = klass.__dict__[name]
    setattr(klass, name, lambda *a: None)
    setattr(klass, name, original)
out["patched"] = sorted(tags.problems())
print(json.dumps(out))
"""


def test_a_class_of_minigrad_patched_and_put_back_is_seen():
    """Every class of minigrad is watched by its ``__dict__``'s version tag: a class
    attribute set and put back at once (``Tensor.__mul__``, ``Tracker._observe``,
    ``_Ledger._entry``) is seen for good, while what a correct solution and the tests do
    (subclass ``Function``, track, checkpoint, read annotations) writes no class of it."""
    if runner.dict_tag_reader()[0] is None:
        pytest.skip("no dict version tag on this interpreter")
    out = run_harness(CLASS_HARNESS)
    assert out["has"] == ["Function", "Tensor", "Tracker", "_Ledger"], out
    assert out["legit"] == [], out
    assert out["patched"] == ["minigrad.memory.Tracker", "minigrad.memory._Ledger",
                              "minigrad.tensor.Tensor"], out


TRACKER_HARNESS = r"""
import gc, json, sys, threading
import numpy as np
from minigrad import Tensor, memory
from grading import runner as R
checks = []
enter, leave, trust, answers = R.make_guard(R.trusted_codes(), {}, checks=checks)
check = checks[0]
cell = '''
def honest():
    with memory.track() as m:
        y = (Tensor(np.ones((64, 8), np.float32), requires_grad=True) * 2).exp()
    return m.peak["total"]
def lower_peak():
    with memory.track() as m:
        y = (Tensor(np.ones((64, 8), np.float32), requires_grad=True) * 2).exp()
        m.peak["activations"] = m.start["activations"]  # the answer the test reads, lowered
    return m.peak["activations"]
def shadow_observe():
    with memory.track() as m:
        m._observe = lambda live: None  # an attribute of its own: the peak never moves
        y = (Tensor(np.ones((64, 8), np.float32), requires_grad=True) * 2).exp()
def fewer_ops():
    with memory.track() as m:
        y = (Tensor(np.ones((64, 8), np.float32), requires_grad=True) * 2).exp()
        m.counts["forward"]["exp"] = 0
def lower_live():
    live = memory._LEDGER.live  # the ledger's own numbers, lowered while it counts, put back
    with memory.track() as m:
        live["activations"] -= 1 << 20
        y = (Tensor(np.ones((64, 8), np.float32), requires_grad=True) * 2).exp()
        live["activations"] += 1 << 20
def forged_event():
    with memory.track() as m:
        sys.audit("minigrad.memory.tracker", "observe", m, {"activations": 0})
def kept():  # a graph kept while a test measures: its saved arrays, held
    x = Tensor(np.ones((64, 8), np.float32), requires_grad=True)
    y = ((x * 2).exp() * 3).tanh()
    fresh = [r() for r, key in list(memory._LEDGER._watch.values())]
    return x, y, [a for a in fresh if a is not None and memory.category(a) == "activations"]
def dead_direct():
    with memory.track() as m:
        x, y, saved = kept()
        for a in saved:  # the ledger's own method: the event it raises is genuine
            while memory.category(a) is not None:
                memory._LEDGER._dead(id(memory.base_buffer(a)))
def freed_direct():
    with memory.track() as m:
        x, y, saved = kept()
        keys = {id(memory.base_buffer(a)) for a in saved}
        for r, key in list(memory._LEDGER._watch.values()):
            if key in keys:  # the weak reference is alive: its array is not freed
                memory._LEDGER._freed(r)
def release_direct():
    with memory.track() as m:
        x, y, saved = kept()
        for a in saved:
            while memory.category(a) == "activations":
                memory.release(a, "activations")
def release_role_direct():
    from minigrad import hooks
    with memory.track() as m:
        x, y, saved = kept()
        for a in saved:
            while memory.category(a) == "activations":
                hooks.release_role(a, "activations")  # through the hook registry
def unlisted():
    with memory.track() as m:
        trackers = memory._LEDGER.trackers
        saved = list(trackers)
        trackers.clear()  # the tracker observes nothing meanwhile, put back after
        x, y, _ = kept()
        del x, y, _
        trackers.extend(saved)
def edit_end():
    with memory.track() as m:
        x, y, _ = kept()
    m.end = dict(m.start)
def edit_timeline():
    with memory.track() as m:
        x, y, _ = kept()
    del m.timeline[1:]
def edit_flops_by_op():
    with memory.track() as m:
        x, y, _ = kept()
    m.flops_by_op["forward"]["exp"] = 0
def honest_backward():
    with memory.track() as m:
        x, y, _ = kept()
        y.sum().backward()
    with memory.track(record_timeline=False) as m2:
        x, y, _ = kept()
    return m.peak["total"]
def race():
    got, stop = [], []
    def spin():
        while not stop:
            try:
                gc.get_objects()
                got.append(1)
                return
            except RuntimeError:
                pass
    t = threading.Thread(target=spin)
    t.start()
    for _ in range(3000):  # the hook works on every open: a window for the thread
        open("/etc/hostname").close()
    stop.append(1)
    t.join()
    return len(got)
def graph():
    x = Tensor(np.ones((32, 32), np.float32), requires_grad=True)
    return x, ((x * 2).exp() * 3).tanh().sum()
def node_of(y):
    from minigrad.tensor import node_of
    return node_of(y)
def forged_ctx():  # a Context of the notebook's given a real node's saved array
    from minigrad.tensor import Context
    x, loss = graph()
    with memory.track() as m:
        real = node_of(loss).inputs[0]
        c = Context()
        c.saved = real.saved
        c.release()
        loss.backward()
def restored(retain):  # the real node released, its saved arrays put back
    x, loss = graph()
    with memory.track() as m:
        ctx = node_of(loss).inputs[0]
        saved = ctx.saved
        ctx.release()
        ctx.saved, ctx.released = saved, False
        loss.backward(retain_graph=retain)
        ctx.released = True
def restored_ctx():
    restored(False)
def restored_retain():  # the same, backward keeping the graph
    restored(True)
def swapped_ctx():  # a real node releasing another node's arrays
    x, loss = graph()
    with memory.track() as m:
        a = b = node_of(loss).inputs[0]
        while b is a or not any(isinstance(s, np.ndarray) for s in b.saved):
            b = b.inputs[0]  # the next node up that saved an array
        a.saved = b.saved
        a.release()
def packed_graph(pack, unpack):
    from minigrad.autograd import saved_tensors_hooks
    x = Tensor(np.ones((32, 32), np.float32), requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        loss = ((x * 2).exp() * 3).tanh().sum()
    return x, loss
def packed_entries(loss):
    from minigrad.tensor import graph_nodes
    return [s for n in graph_nodes(loss) for s in getattr(n, "saved", ())
            if hasattr(s, "unpack_hook")]
def packed_by_hand():  # a packed entry released while its node holds it
    x, loss = packed_graph(lambda a: a, lambda a: a)
    with memory.track() as m:
        for p in packed_entries(loss):
            p.release()
def dropped_by_hand():  # what a packed entry unpacked, let go of before its backward
    x, loss = packed_graph(lambda a: (a,), lambda t: t[0])
    with memory.track() as m:
        for p in packed_entries(loss):
            p.unpack()
            p.drop_unpacked()
def honest_packed():  # saved-tensor hooks: retain_graph, a second backward, dropped
    with memory.track() as m:
        for pack, unpack in ((lambda a: a, lambda a: a), (lambda a: (a,), lambda t: t[0])):
            x, loss = packed_graph(pack, unpack)
            loss.backward(retain_graph=True)
            loss.backward()
            x, loss = packed_graph(pack, unpack)
            del x, loss
            gc.collect()
def honest_nodes():  # training steps, retain_graph, a graph dropped, checkpoint
    from minigrad.checkpoint import checkpoint
    with memory.track() as m:
        for _ in range(2):
            x, loss = graph()
            loss.backward()
        x, loss = graph()
        loss.backward(retain_graph=True)
        loss.backward()
        try:
            loss.backward()  # a second time: the engine's error
        except RuntimeError:
            pass
        x, loss = graph()
        del x, loss
        x = Tensor(np.ones((32, 32), np.float32), requires_grad=True)
        y = checkpoint(lambda t: ((t * 2).exp() * 3).tanh(), x)
        y.sum().backward()
        x, loss = graph()
        cyc = [loss]
        cyc.append(cyc)
        del cyc, x, loss
        gc.collect()
'''
ns = {"np": np, "memory": memory, "Tensor": Tensor, "sys": sys, "threading": threading, "gc": gc}
exec(compile(cell, "<your cell 1>", "exec"), ns)
"""


@pytest.mark.parametrize("route", ["honest", "honest_backward", "lower_peak", "shadow_observe",
                                   "fewer_ops", "lower_live", "forged_event", "race", "dead_direct",
                                   "freed_direct", "release_direct", "release_role_direct", "unlisted", "edit_end",
                                   "edit_timeline", "edit_flops_by_op"])
def test_a_ledger_tracker_edited_while_a_test_measures_is_seen(route):
    """The hook keeps its own copy of each tracker a test makes (from the events the
    tracker's own methods raise) and of the ledger's live bytes (from the ledger's): a peak
    lowered, ``_observe`` shadowed by an attribute of the notebook's, an op count changed,
    the ledger's live bytes lowered and put back, or a forged event is named; an honest measurement
    is not. A thread of the notebook's racing the hook gets no ``gc.get_objects`` through.
    The ledger's own methods called by the notebook (``_LEDGER._dead``, ``_freed`` with the
    weak reference of an array still alive, ``memory.release``,
    ``hooks.release_role``) are named, as are a tracker taken off the ledger's list while
    arrays come and go and a tracker's ``end``, ``timeline`` or ``flops_by_op`` edited after
    its region."""
    if route == "race":
        body = "enter()\nout = ns['race']()\nleave()\nprint(json.dumps(out))\n"
    else:
        body = (f"answers(True)\nenter()\ntry:\n    ns[{route!r}]()\nfinally:\n    leave()\n"
                "answers()\nprint(json.dumps(check()))\n")
    got = run_harness(TRACKER_HARNESS + body)
    if route.startswith("honest"):
        assert got == "", got
    elif route in ("dead_direct", "freed_direct", "release_direct", "release_role_direct"):
        assert "ledger" in got and "tracker" not in got, got
    elif route == "race":
        assert got == 0, "a racing thread's gc.get_objects got through"
    else:
        assert "tracker" in got, got


@pytest.mark.parametrize("route", ["honest_nodes", "forged_ctx", "restored_ctx", "restored_retain",
                                   "swapped_ctx", "honest_packed", "packed_by_hand",
                                   "dropped_by_hand"])
def test_a_node_s_saved_arrays_released_by_another_or_put_back_are_seen(route):
    """The ledger counts a node's saved arrays as released only from the node that saved
    them, once: a ``Context`` the notebook made given a real node's arrays, a real node's
    arrays put back after its release (backward then releases it again, or runs through it
    with ``retain_graph``), a node releasing another node's arrays are named; training
    steps, ``retain_graph``, a graph dropped (in a cycle too) and checkpoint are not."""
    body = (f"answers(True)\nenter()\ntry:\n    ns[{route!r}]()\nfinally:\n    leave()\n"
            "answers()\nprint(json.dumps(check()))\n")
    got = run_harness(TRACKER_HARNESS + body)
    if route.startswith("honest"):
        assert got == "", got
    else:
        assert "node" in got or "packed saved entry" in got, got


def test_no_signal_handler_can_be_installed_after_the_grader_s():
    """After ``refuse_new_signal_handlers`` (where the platform has seccomp) ``signal.signal``
    fails, also through a fresh instance of ``_signal`` and in a forked child; the handler
    installed before still runs."""
    code = r"""
import importlib.util, json, os, signal, sys, time
from grading import runner
ran = []
signal.signal(signal.SIGALRM, lambda *a: ran.append(1))
why = runner.refuse_new_signal_handlers()
out = {"why": why}
def attempt(install):
    try:
        install(signal.SIGPROF, lambda *a: None)
        return "installed"
    except OSError:
        return "refused"
out["signal"] = attempt(signal.signal)
fresh = importlib.util.module_from_spec(importlib.util.find_spec("_signal"))
out["fresh"] = attempt(fresh.signal)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, attempt(signal.signal).encode())
    os._exit(0)
os.waitpid(pid, 0)
out["child"] = os.read(r, 100).decode()
signal.setitimer(signal.ITIMER_REAL, 0.01)
time.sleep(0.1)
out["alarm"] = len(ran)
print(json.dumps(out))
"""
    out = run_harness(code, timeout=60)
    if out["why"]:
        pytest.skip(out["why"])
    assert out == {"why": "", "signal": "refused", "fresh": "refused", "child": "refused", "alarm": 1}, out


def test_no_seccomp_filter_means_nothing_is_graded():
    """Where the seccomp filter cannot be put in (another architecture, no seccomp, no
    ctypes), a notebook's signal handler could not be refused, and CPython raises no audit
    event for it: such a handler, armed from a fork handler and a timer, read the trackers
    of a3's tests while they measured (a3_signal_steal_tracker: 4 / 18 from no formula).
    The runner then fails closed: before any cell it tells the driver, which stops with
    ``Unguarded`` (the reference's run first, so no submission is scored)."""
    from grading import driver

    marker = '    (SIGALRM, its time limit) must be in place before. Returns "" or why not."""\n'
    source = RUNNER.read_text()
    assert source.count(marker) == 1
    script = (f"import sys\nsys.path.insert(0, {str(ROOT / 'assignments')!r})\n"
              f"src = open({str(RUNNER)!r}).read().replace({marker!r}, "
              f"{marker!r} + '    return \"no seccomp filter (simulated)\"\\n', 1)\n"
              f"exec(compile(src, {str(RUNNER)!r}, 'exec'), {{'__name__': '__main__', "
              f"'__file__': {str(RUNNER)!r}, '__builtins__': __builtins__}})\n")
    cells = [{"index": 0, "source": "import sys\nprint('CELL RAN', file=sys.stderr)"}]
    with pytest.raises(driver.Unguarded, match="no seccomp filter \\(simulated\\)"):
        driver.run_notebook(lambda: [sys.executable, "-c", script], cells, [], [], 10.0, env=HARNESS_ENV)


HANDOUT_CLASS_HARNESS = r"""
import copy, json, sys, types
import numpy as np
import numpy.lib.mixins
from grading import runner as R
given = ["import numpy as np\nimport math\nfrom minigrad import Tensor\n"]
roots = R.handout_roots(given)
victim = types.ModuleType("victimlib.core")  # a handout library whose code sets a class attribute
exec("class Device:\n    kind = None\n    @staticmethod\n    def get():\n"
     "        if Device.kind is None:\n            Device.kind = 'cpu'\n        return Device.kind\n"
     "    @classmethod\n    def reset(cls):\n        cls.kind = None\n"
     "class Other:\n    def f(self):\n        self.kind = 1\n", victim.__dict__)
sys.modules["victimlib.core"] = victim
mods = [m for _, m in sorted(sys.modules.items()) if isinstance(m, types.ModuleType)]
classes = R.library_classes(mods, roots=roots + ["victimlib"], heap_only=True)
R.prepare_classes(classes)
writers = R.class_writers(classes)
tags = R.NamespaceTags(*R.dict_tag_reader())
tags.install([], classes=classes, class_writers=writers)
Device, Other = victim.Device, victim.Other
out = {"roots": roots, "has": sorted(c.__qualname__ for c in classes if c.__qualname__ in
                                     ("errstate", "NDArrayOperatorsMixin", "finfo", "Device", "ndarray"))}
out["writers"] = sorted(n for c in (Device, Other)
                        for n in writers.get(id(R.gc.get_referents(R._CLASS_DICT(c))[0]), ()))
# what a correct notebook and the library do: errstate, finfo, copies, the library's own write
with np.errstate(over="ignore"):
    np.exp(np.float32(100))
np.finfo(np.float32), np.iinfo(np.int16), copy.deepcopy(np.arange(3)), np.testing.assert_allclose(1, 1)
Device.get(), Device.reset(), Device.get()
out["legit"] = tags.problems()
# a notebook's patches, put back at once
for klass, name in ((np.errstate, "__enter__"), (numpy.lib.mixins.NDArrayOperatorsMixin, "__add__"),
                    (Other, "f")):
    original = klass.__dict__[name]
    setattr(klass, name, lambda *a: None)
    setattr(klass, name, original)
original = Device.__dict__["kind"]  # the library's own name, set and put back: seen too
Device.kind = "gpu"
Device.kind = original
out["patched"] = sorted(tags.problems())
print(json.dumps(out))
"""


def test_numpy_s_and_a_handout_library_s_classes_patched_and_put_back_are_seen():
    """NumPy's Python classes and those of the libraries the handout imports (torch's for
    a5, where setting ``StorageWeakRef.expired`` while a test measured scored) are watched
    by their ``__dict__``'s version tag: a class attribute set and put back at once is seen;
    what their own code sets on a class at run time (a lazily found device type) is taken
    in, found in their bytecode (not ``self.kind = ...``: an instance's), and NumPy used as
    a notebook uses it writes no class."""
    if runner.dict_tag_reader()[0] is None:
        pytest.skip("no dict version tag on this interpreter")
    out = run_harness(HANDOUT_CLASS_HARNESS)
    assert out["roots"] == ["numpy"], out
    assert out["has"] == ["Device", "NDArrayOperatorsMixin", "errstate", "finfo"], out
    assert out["writers"] == ["kind"], out
    assert out["legit"] == [], out
    assert out["patched"] == ["numpy.errstate", "numpy.lib.mixins.NDArrayOperatorsMixin",
                              "victimlib.core.Device", "victimlib.core.Other"], out


LIBRARY_MODULE_HARNESS = r"""
import json, sys, types
from grading import runner as R
def library(name, source):
    m = types.ModuleType(name)
    exec(source, m.__dict__)
    sys.modules[name] = m
    return m
pkg = library("victimlib", "")
core = library("victimlib.core", "CACHE = None\ndef warm():\n    global CACHE\n    CACHE = {}\n")
meters = library("victimlib.meters", "def meter():\n    return 1\n")
other = library("victimlib.other", "def f():\n    return 1\n")
tags = R.NamespaceTags(*R.dict_tag_reader())
tags.install([], libraries=[pkg, core, meters, other])
out = {}
core.warm()  # the library's own global write
sub = types.ModuleType("victimlib.late")  # a submodule imported later, bound by the import system
sys.modules["victimlib.late"] = sub
pkg.late = sub
out["legit"] = tags.problems()
original = meters.meter
meters.meter = lambda: 0  # a notebook's patch, put back at once
meters.meter = original
fake = types.ModuleType("victimlib.other")  # a fake in place of a submodule already bound
pkg.other = fake
out["patched"] = sorted(tags.problems())
print(json.dumps(out))
"""


def test_a_handout_library_s_module_rebound_is_seen():
    """The modules of a library the handout imports that are not guarded like NumPy's
    (torch's: a5 scored when a policy rebound ``torch.multiprocessing.reductions.StorageWeakRef``,
    which the tests' meters import) are watched by tag: a name rebound, even put back at
    once, or a submodule replaced is seen; the library's own ``global`` writes and a
    submodule the import system binds later are not. (In a module whose own code rebinds
    a global, a name set and put back within one test is not seen: its tag would move the
    same way when its code sets a flag and puts it back.)"""
    if runner.dict_tag_reader()[0] is None:
        pytest.skip("no dict version tag on this interpreter")
    out = run_harness(LIBRARY_MODULE_HARNESS)
    assert out["legit"] == [], out
    assert out["patched"] == ["victimlib", "victimlib.meters"], out


FINALIZER_HARNESS = r'''
import json
from grading import runner as R
enter, leave, trust, answers = R.make_guard(R.trusted_codes(), {})
cell = """
import ctypes, gc
ok, refused = [], []
class Trap:
    def __del__(self):
        try:
            ctypes.string_at(id(self), 8)
            ok.append(1)
        except RuntimeError:
            refused.append(1)
def run():
    gc.set_threshold(1)
    try:
        for _ in range(300):
            a, b = Trap(), Trap()
            a.other, b.other = b, a  # a cycle: only the collector frees it, whenever it runs
            del a, b
            try:
                open("/etc/hostname").close()
            except OSError:
                pass
    finally:
        gc.set_threshold(700)
        gc.collect()
    return len(ok), len(refused)
"""
ns = {"__name__": "__main__"}
exec(compile(cell, "<your cell 1>", "exec"), ns)
enter()
try:
    got = ns["run"]()
finally:
    leave()
print(json.dumps(got))
'''


def test_a_finalizer_the_collector_runs_inside_the_hook_gets_no_ctypes():
    """The collector runs whenever it allocates, also while the audit hook works: a
    notebook's finalizer then runs inside the hook's work, where the events of the hook's
    own (trusted) code pass. Its ctypes calls came through ctypes' trusted wrappers (584 of
    600 passed); each frame up to the hook's is now checked, and every one is refused."""
    ok, refused = run_harness(FINALIZER_HARNESS)
    assert ok == 0 and refused == 600, (ok, refused)
