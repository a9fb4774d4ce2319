"""Run a notebook's cells once, then each test in a fresh process forked from that state.

Usage (driver.py starts it inside the sandbox, one per notebook: a submission, or the
reference solution in a sandbox of its own):

    python -I runner.py

It talks to the driver in JSON lines: commands on stdin, messages on the channel that was
its stdout; whatever the notebook prints goes to stderr (the driver keeps the start of it).

1. Import NumPy, minigrad and the grading package; fingerprint every function of them and
   of ``builtins`` down to code objects, defaults and closure cells (``Fingerprint``); put
   in an audit hook that refuses, while the notebook's code can run, new processes,
   ``ctypes``, signals to other processes, other audit hooks, trace and profile functions
   that the grader did not install, and reading the heap (``gc.get_objects``...). Their
   modules (and this one, which runs as ``__main__``) get the class `GuardedModule`: notebook
   code cannot rebind their names, and a write that goes past that class (a function's
   ``__globals__``, ``object.__setattr__``) moves their namespace's dict version tag
   (`NamespaceTags`), which is checked with the fingerprint. The guard's own state is held
   by the audit hook, out of the notebook's reach. Every class of minigrad, of the grader,
   of NumPy and of the libraries the handout imports is watched by its ``__dict__``'s
   version tag the same way (a class attribute set and put back), and so are those
   libraries' modules (torch's); the hook keeps its own copy of minigrad's ledger and of
   each tracker a test enters. Once the grader's SIGALRM handler is in, a seccomp filter
   refuses every other signal handler; where none can be put in, nothing is graded.
2. ``{"kind": "load", "cells": [...], "given": [...], "skip": [...]}``: run the notebook's
   cells, each under a time limit (a message before each, so that a cell that ends or hangs
   the process is known and skipped when the driver starts it again); check the
   fingerprint; run the handed-out code (``given``) in a namespace of its own.
3. ``{"kind": "test", ...}`` for each test: fork; the child binds the question's names
   (``probes.question_env``), runs the test as a probe under a time limit, checks the
   fingerprint again and writes the answers it recorded, as data; the parent waits (and
   kills it at the limit). A test that hangs or kills its process costs that test only,
   and no test sees what another did.

Nothing here decides a grade: the answers go to the driver, which compares them with the
reference's (``minigrad.testing.judge``) in a process the notebook's code never touches.
Whatever the notebook writes on the channel can at most change its own answers.
"""
from __future__ import annotations

import builtins
import contextlib
import gc
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

# Imported before any notebook code runs: these are fingerprinted and their code trusted.
import numpy  # noqa: E402,F401
import numpy.testing  # noqa: E402,F401

import minigrad  # noqa: E402,F401
import minigrad.plan  # noqa: E402,F401
import minigrad.testing  # noqa: E402,F401
from grading import kit, probes  # noqa: E402,F401

MAX_MESSAGE_BYTES = 16 << 20


class TimeLimit(BaseException):
    """Raised in the main thread when a cell or a test runs past its time limit."""


# Exact types only, and attributes read through the C descriptors: a value a notebook planted
# runs no code of its own when the fingerprint looks at it (``isinstance`` would read its
# ``__class__``, ``getattr`` and ``vars`` its own properties).
_PLAIN_TYPES = (int, float, str, bytes, bool, type(None))
_CLASS_DICT = type.__dict__["__dict__"].__get__
_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__
_CLASS_MRO = type.__dict__["__mro__"].__get__


_MISSING = object()


def _cell_values(fn) -> tuple:
    """The contents of a function's closure cells (``_MISSING`` for an empty cell)."""
    out = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append(_MISSING)
    return tuple(out)


def _hold_code(value, functions: list) -> None:
    """`_code_entries`'s objects, held: ``(function, code, defaults, kwdefaults, cell
    contents)`` for a function and for what a staticmethod, classmethod or property wraps."""
    if type(value) in (staticmethod, classmethod, property):
        for attr in ("__func__", "fget", "fset"):
            inner = getattr(value, attr, None)
            if inner is not None:
                _hold_code(inner, functions)
    if type(value) is types.FunctionType:
        functions.append((value, value.__code__, value.__defaults__, value.__kwdefaults__,
                          _cell_values(value)))


def _code_entries(key, value):
    """(key, identity) pairs for a value and, for functions, what running it depends on."""
    yield key, id(value)
    fn = value
    kind = type(value)
    if kind in (staticmethod, classmethod, property):
        for attr in ("__func__", "fget", "fset"):
            inner = getattr(value, attr, None)
            if inner is not None:
                yield from _code_entries(f"{key}.{attr}", inner)
    if type(fn) is types.FunctionType:
        yield f"{key}.__code__", id(fn.__code__)
        yield f"{key}.__defaults__", id(fn.__defaults__)
        yield f"{key}.__kwdefaults__", id(fn.__kwdefaults__)
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                yield f"{key}.<cell {i}>", id(cell.cell_contents)
            except ValueError:
                yield f"{key}.<cell {i}>", None


_MODULE_SETATTR = types.ModuleType.__setattr__
_MODULE_DELATTR = types.ModuleType.__delattr__
_DELETED = object()
# A guarded module asks the grader's audit hook (``make_guard``) through these events, never
# through state a notebook could reach (the runner's own module is ``__main__``): whether a
# write may be made (the hook makes it, or raises), and whether a read of the namespace is
# trusted code's. With no hook installed, every write is made and every read is trusted.
WRITE_EVENT, READ_EVENT = "grading.module_write", "grading.module_dict"
_audit = sys.audit


class GuardedModule(types.ModuleType):
    """The class of minigrad's, NumPy's and the grader's modules while a notebook is graded.

    Notebook code cannot rebind their names, not even for a moment (a patch undone before
    the test ends leaves no trace for the fingerprint to see): ``mod.f = ...``,
    ``setattr``, ``del`` and a new ``__class__`` raise (and count as tampering), and
    ``vars(mod)`` and ``mod.__dict__`` hand it a read-only view. A plain value (a number,
    a string) may still be rebound, as the fingerprint allows. Library code (trusted) is
    unaffected: the import system still binds a submodule on its package. A write that
    goes past this class (a function's ``__globals__``, ``object.__setattr__``, the raw
    ``__dict__``) is seen by `NamespaceTags`."""

    __slots__ = ()

    def __setattr__(self, name, value):
        done: list = []
        _audit(WRITE_EVENT, self, name, value, done)  # the hook writes (or refuses)
        if not done:
            _MODULE_SETATTR(self, name, value)

    def __delattr__(self, name):
        done: list = []
        _audit(WRITE_EVENT, self, name, _DELETED, done)
        if not done:
            _MODULE_DELATTR(self, name)

    @property
    def __dict__(self):
        namespace, untrusted = _MODULE_DICT(self), []
        _audit(READ_EVENT, self, untrusted)
        return types.MappingProxyType(namespace) if untrusted else namespace


GuardedModule.__module__ = "grading.runner"  # a class of the grader's (its __dict__ is watched)


def guard_modules(modules) -> set:
    """Give each plain module of ``modules`` the class `GuardedModule`; returns the ids of
    their namespaces (what a function's ``__globals__`` leads to)."""
    namespaces = set()
    for mod in modules:
        if type(mod) is types.ModuleType and mod is not builtins:
            object.__setattr__(mod, "__class__", GuardedModule)
        if type(mod) is GuardedModule:
            namespaces.add(id(_MODULE_DICT(mod)))
    return namespaces


# --- every write to a guarded module's namespace, seen (PEP 509's dict version tag) -------
# Two writes raise no audit event and pass `GuardedModule`'s checks: through a function's
# ``__globals__`` (``minigrad.memory.track.__globals__["x"] = evil``) and through
# ``object.__setattr__`` / ``types.ModuleType.__setattr__`` / the raw ``__dict__``
# descriptor on the module. Undone before the test ends, such a patch leaves the
# fingerprint as it was; it does move the namespace's version tag, for good.
DICT_TAG_OFFSET = 24  # ob_refcnt, ob_type, ma_used, then ma_version_tag (64-bit CPython)


def dict_tag_reader(offset: int = DICT_TAG_OFFSET):
    """``(view, "")``: ``view(d)`` is a ctypes ``c_uint64`` over dict ``d``'s version tag
    (PEP 509's ``ma_version_tag``, right after ``ma_used``: CPython 3.6 to 3.13 on 64-bit
    builds), whose ``.value >> view.shift`` changes whenever ``d`` does (in 3.12 and 3.13
    the low 8 and 12 bits are watchers' bits, which a change does not move: each change
    moves the bits above by one step, which the probe checks); or ``(None, why)`` where this
    interpreter has no such tag (Python 3.14 keeps a watcher tag that changes do not move;
    a free-threaded build lays a dict out otherwise). Found out on a probe dict (its
    ``ma_used`` must follow its length and its tag every change), never assumed."""
    version = "Python " + ".".join(map(str, sys.version_info[:3]))
    if sys.implementation.name != "cpython":
        return None, f"{version} is not CPython"
    try:
        import ctypes
    except ImportError as e:
        return None, f"{version} has no ctypes ({e})"
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None, f"{version} is not a 64-bit build"

    def view(d):
        return ctypes.c_uint64.from_address(id(d) + offset)

    view.shift = 12 if sys.version_info >= (3, 13) else 8 if sys.version_info >= (3, 12) else 0
    step = 1 << view.shift

    probe: dict = {}
    used, tag = ctypes.c_ssize_t.from_address(id(probe) + offset - 8), view(probe)
    last = tag.value
    for change in (lambda: probe.__setitem__("a", 1), lambda: probe.__setitem__("a", 2),
                   lambda: probe.__setitem__("b", []), lambda: probe.pop("a"),
                   lambda: probe.update(c=3), lambda: probe.setdefault("d", 4), probe.clear):
        change()
        if used.value != len(probe) or tag.value == last or (tag.value - last) % step:
            return None, f"{version} has no dict version tag that every change of a dict moves"
        last = tag.value
    len(probe), probe.get("a")  # a read leaves it
    if tag.value != last:
        return None, f"{version} has no dict version tag that every change of a dict moves"
    return view, ""


def global_writers(namespaces) -> dict:
    """id(namespace) -> the names that trusted functions rebind or delete in it at run time
    (``global`` statements: STORE_GLOBAL and DELETE_GLOBAL in their code objects, nested
    code included), for every function alive whose globals are one of ``namespaces``."""
    import opcode

    ops = {opcode.opmap["STORE_GLOBAL"], opcode.opmap["DELETE_GLOBAL"]}
    extended = opcode.opmap["EXTENDED_ARG"]
    found: dict = {}
    seen: set = set()

    def scan(code, names):
        if id(code) in seen:
            return
        seen.add(id(code))
        raw, ext = code.co_code, 0
        if any(op in raw[0::2] for op in ops):
            for i in range(0, len(raw), 2):
                op, arg = raw[i], raw[i + 1] | ext
                ext = arg << 8 if op == extended else 0
                if op in ops:
                    names.add(code.co_names[arg])
        for const in code.co_consts:
            if type(const) is types.CodeType:
                scan(const, names)

    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and id(obj.__globals__) in namespaces:
            names: set = set()
            scan(obj.__code__, names)
            if names:
                found.setdefault(id(obj.__globals__), set()).update(names)
    return found


def prepare_namespaces(modules) -> None:
    """Bind now, before the fingerprint, what CPython itself would add to a module's
    namespace at run time: ``__warningregistry__`` (a warning attributed to the module's
    code) and ``__annotations__`` (made when first read)."""
    for mod in modules:
        namespace = _MODULE_DICT(mod)
        namespace.setdefault("__warningregistry__", {})
        if "__annotations__" not in namespace:
            try:
                getattr(mod, "__annotations__", None)
            except Exception:  # noqa: BLE001 - a module that has none to give
                pass


class NamespaceTags:
    """The version tag (`dict_tag_reader`) of every guarded module's namespace, and the tag
    each should have: every write `GuardedModule` performs or permits (the import system
    binding a submodule, a name NumPy lacks, a plain value) moves the expected tag with it;
    any other write (a function's ``__globals__``, ``object.__setattr__`` or
    ``types.ModuleType.__setattr__`` on the module, its raw ``__dict__``), even one put
    back at once, leaves the tag different from the expected one for good: ``problems()``
    names those modules.

    A namespace that trusted code writes at run time (``global`` statements found by
    `global_writers`; minigrad and the grader have none, NumPy's ``numpy.lib._utils_impl``
    has ``np.info``'s cache) is held to less: a change of its tag is accepted when only
    those names differ from what it held. ``view`` None (no tag on this interpreter):
    nothing is checked (``why`` says so)."""

    def __init__(self, view=None, why=""):
        self.view, self.why = view, why
        shift = getattr(view, "shift", 0)
        entries: dict = {}  # id(namespace) -> [name, namespace, tag, expected, writable, held]
        found: list = []
        self.entries, self.found, self.shift = entries, found, shift
        # The checks are closures over the names bound here, never methods or globals looked
        # up when they run: a class attribute or a global of this module that notebook code
        # replaced would otherwise blind them (it moves a watched tag instead).
        _dict, _list, _id, _deleted = dict, list, id, _DELETED
        _issubclass, _type, _module, _module_dict, _modules = issubclass, type, types.ModuleType, _MODULE_DICT, sys.modules
        _str = str

        def check(entry) -> None:
            now = entry[2].value >> shift
            if now == entry[3]:
                return
            if entry[4] or entry[6] == 2:
                held, namespace = entry[5], entry[1]
                changed = {k for k in held.keys() | namespace.keys()
                           if held.get(k, _deleted) is not namespace.get(k, _deleted)}
                if entry[6] == 2:  # a library's module: a submodule newly bound on it too
                    rest = changed - entry[4]
                    ok = all(_type(k) is _str and k not in held and _issubclass(_type(namespace[k]), _module)
                             and _module_dict(namespace[k]).get("__name__") == f"{entry[0]}.{k}"
                             and _modules.get(f"{entry[0]}.{k}") is namespace[k] for k in rest)
                    ok = ok and bool(changed or entry[4])  # no writer: nothing set and put back
                else:  # a class whose tag moved with nothing changed: set and put back
                    ok = changed <= entry[4] and bool(changed or not entry[6])
                if ok:
                    entry[3], entry[5] = now, _dict(namespace)
                    return
            if entry[0] not in found:
                found.append(entry[0])
            entry[3] = now

        def before(namespace) -> None:
            entry = entries.get(_id(namespace))
            if entry is not None:
                check(entry)  # a write past the guard before this one stays found

        def after(namespace) -> None:
            entry = entries.get(_id(namespace))
            if entry is not None:
                entry[3] = entry[2].value >> shift
                if entry[5] is not None:
                    entry[5] = _dict(entry[1])

        def problems() -> list:
            for entry in _list(entries.values()):
                check(entry)
            return _list(found)

        self.before, self.after, self.problems = before, after, problems

    def install(self, modules, writers=None, classes=(), class_writers=None, libraries=()) -> None:
        """Watch each module's namespace and each class's ``__dict__`` (classes that nothing
        writes while a notebook is graded: the grader's own). ``class_writers``: id(a class's
        ``__dict__``) -> the names its library's own code sets on it at run time
        (`class_writers`: ``torch.utils.checkpoint.DefaultDeviceType._default_device_type``):
        a change of those names only is taken in; a tag that moved with nothing changed (an
        attribute set and put back) is not. ``libraries``: modules of the handout's
        libraries (torch's), not guarded by `GuardedModule`: a name their own code rebinds
        (``global``) and a submodule the import system binds are taken in; any other name
        rebound (``torch.multiprocessing.reductions.StorageWeakRef``), even put back, is not."""
        if self.view is None:
            return
        if writers is None:
            writers = global_writers({id(_MODULE_DICT(m)) for m in modules})
        spaces = [(str(_MODULE_DICT(m).get("__name__", "?")), _MODULE_DICT(m), writers, 0) for m in modules]
        spaces += [(f"{_CLASS_DICT(c).get('__module__', '?')}.{c.__qualname__}",
                    gc.get_referents(_CLASS_DICT(c))[0], class_writers or {}, 1) for c in classes]
        if libraries:
            lib_writers = global_writers({id(_MODULE_DICT(m)) for m in libraries})
            spaces += [(str(_MODULE_DICT(m).get("__name__", "?")), _MODULE_DICT(m), lib_writers, 2)
                       for m in libraries]
        for name, namespace, known, kind in spaces:
            if id(namespace) in self.entries or type(namespace) is not dict:
                continue
            tag, writable = self.view(namespace), frozenset(known.get(id(namespace), ()))
            self.entries[id(namespace)] = [name, namespace, tag, tag.value >> self.shift, writable,
                                           dict(namespace) if writable or kind == 2 else None, kind]


def grader_classes(modules) -> list:
    """The grader's own classes (this runner's, its package's, ``minigrad.testing``'s):
    nothing writes them while a notebook is graded, so their ``__dict__`` is watched too."""
    out = []
    for mod in modules:
        namespace = _MODULE_DICT(mod)
        name = namespace.get("__name__")
        if not (name in ("__main__", "minigrad.testing") or str(name).startswith("grading")):
            continue
        for value in list(namespace.values()):
            if type(value) is type and _CLASS_DICT(value).get("__module__") in (name, "grading.runner") \
                    and value not in out:
                out.append(value)
    return out


def library_classes(modules, roots=("minigrad",), heap_only=False) -> list:
    """Every class minigrad defines (its modules' own, nested classes too): nothing writes
    them after import (minigrad.ops binds Tensor's operators at import), so a class
    attribute set while a notebook is graded (``Tensor.__mul__``, ``_Ledger._entry``,
    ``Tracker._observe``), even put back before the test ends, moves the version tag of the
    class's ``__dict__`` for good: CPython 3.11 to 3.13 raise no audit event for it. What
    CPython itself writes there at run time (``__annotations__``, made when first read) is
    made now (`prepare_classes`).

    ``roots``: the packages whose modules' classes are taken (NumPy's and the handout's
    libraries too: `handout_roots`); ``heap_only``: only classes whose attributes can be
    set at all (not C's static types, nor immutable ones)."""
    out, seen = [], set()

    def visit(klass, prefix):
        if id(klass) in seen:
            return
        seen.add(id(klass))
        flags = type.__dict__["__flags__"].__get__(klass)
        if heap_only and (not flags & (1 << 9) or flags & (1 << 8)):  # HEAPTYPE, IMMUTABLETYPE
            return
        out.append(klass)
        for value in list(_CLASS_DICT(klass).values()):
            if issubclass(type(value), type) and \
                    str(_CLASS_DICT(value).get("__module__", "")).startswith(prefix):
                visit(value, prefix)

    for mod in modules:
        namespace = _MODULE_DICT(mod)
        name = str(namespace.get("__name__", ""))
        if name.split(".")[0] not in roots:
            continue
        for value in list(namespace.values()):
            if issubclass(type(value), type) and _CLASS_DICT(value).get("__module__") == name:
                visit(value, name.split(".")[0])
    return out


def handout_imports(given) -> list:
    """The import statements at the top level of the handout's cells (``given``)."""
    import ast

    nodes = []
    for text in given:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        nodes += [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return nodes


def handout_roots(given) -> list:
    """NumPy and the packages the handout imports that are neither the standard library's
    nor minigrad's nor the grader's (torch for a5): their classes' ``__dict__`` is watched
    like minigrad's (a5 scored from a policy that set ``StorageWeakRef.expired`` while its
    test measured)."""
    import ast

    roots = {"numpy"}
    for node in handout_imports(given):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif node.module and not node.level:
            roots.add(node.module.split(".")[0])
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    return sorted(r for r in roots if r not in stdlib and r not in ("minigrad", "grading", "__main__")
                  and r in sys.modules)


def class_writers(classes) -> dict:
    """id(a class's ``__dict__``) -> the names that its library's own code sets on the class
    itself at run time (``DefaultDeviceType._default_device_type = ...`` in a function of
    its module or a method of its own, ``cls.name = ...`` in a classmethod): found in the
    bytecode of its module's functions and its methods, nested code included, that store
    an attribute of the class's name (or of a classmethod's first argument)."""
    import dis
    import opcode

    store = opcode.opmap["STORE_ATTR"]
    unpack = dis._unpack_opargs  # (offset, op, arg), inline caches skipped (3.11 and later)
    ops = opcode.opmap
    global_ops, name_ops = {ops["LOAD_GLOBAL"]}, {ops["LOAD_NAME"]}
    deref_ops = {ops[k] for k in ("LOAD_DEREF", "LOAD_CLASSDEREF") if k in ops}
    fast_ops = {ops[k] for k in ops if k.startswith("LOAD_FAST")}
    pair_ops = {ops[k] for k in ("LOAD_FAST_LOAD_FAST",) if k in ops}
    wide_global = sys.version_info >= (3, 11)

    def varname(code, i):
        if hasattr(code, "_varname_from_oparg"):
            return code._varname_from_oparg(i)
        names = code.co_cellvars + code.co_freevars
        return names[i] if i < len(names) else None
    found: dict = {}
    by_module: dict = {}
    for klass in classes:
        by_module.setdefault(_CLASS_DICT(klass).get("__module__"), []).append(klass)

    def nested(code, out):
        out.append(code)
        for const in code.co_consts:
            if type(const) is types.CodeType:
                nested(const, out)

    def scan(code, names, first_arg_class=None):
        if store not in code.co_code[0::2]:
            return
        if first_arg_class is None and not names.keys() & set(code.co_names):
            return
        first = code.co_varnames[0] if code.co_argcount else None
        last_op, last_arg = None, 0
        for _, op, arg in unpack(code.co_code):
            if op == store and last_op is not None:
                target = None
                if last_op in global_ops:
                    target = code.co_names[last_arg >> 1 if wide_global else last_arg]
                elif last_op in name_ops:
                    target = code.co_names[last_arg]
                elif last_op in deref_ops:
                    target = varname(code, last_arg)
                if target in names:
                    found.setdefault(id(gc.get_referents(_CLASS_DICT(names[target]))[0]),
                                     set()).add(code.co_names[arg])
                elif first_arg_class is not None and last_op in fast_ops and first is not None \
                        and varname(code, last_arg & 15 if last_op in pair_ops else last_arg) == first:
                    found.setdefault(id(gc.get_referents(_CLASS_DICT(first_arg_class))[0]),
                                     set()).add(code.co_names[arg])
            last_op, last_arg = op, arg

    for modname, owned in by_module.items():
        mod = sys.modules.get(modname) if type(modname) is str else None
        if not isinstance(mod, types.ModuleType):
            continue
        namespace = _MODULE_DICT(mod)
        names = {k: v for k, v in namespace.items() if any(v is c for c in owned)}
        if not names:
            continue
        for value in list(namespace.values()):
            if type(value) is types.FunctionType and value.__module__ == modname:
                codes: list = []
                nested(value.__code__, codes)
                for code in codes:
                    scan(code, names)
        for klass in owned:
            for value in list(_CLASS_DICT(klass).values()):
                cls_method = type(value) is classmethod
                fn = value.__func__ if type(value) in (staticmethod, classmethod) else value
                if type(fn) is not types.FunctionType:
                    continue
                codes = []
                nested(fn.__code__, codes)
                for code in codes:
                    scan(code, names, klass if cls_method and code is fn.__code__ else None)
    return found


def prepare_classes(classes) -> None:
    """Make now what CPython adds to a class's ``__dict__`` when first asked for it
    (``__annotations__``, 3.10 and later), so that only a write of someone's moves its tag."""
    import copyreg

    for klass in classes:
        try:
            getattr(klass, "__annotations__", None)
        except Exception:  # noqa: BLE001 - a class that has none to give
            pass
        try:  # what copy and pickle store on a class the first time they meet one of its
            copyreg._slotnames(klass)
        except Exception:  # noqa: BLE001, S110 - a class copy cannot handle either
            pass


class Fingerprint:
    """Identity of every function, class and method of some modules, to the code object.

    Replacing a function, a method, a function's ``__code__``, defaults or closure cells,
    or a module in ``sys.modules`` changes it; ordinary state (counters, the RNG, the
    ledger's records) does not."""

    def __init__(self, modules):
        self.modules = list(modules)
        self.state = self._take()
        self.held = self._hold()

    def _hold(self):
        """The same identities as `_take`, as the objects themselves (held, so that no id
        is reused) in flat lists that `changed` compares with ``is``: no key is formatted
        unless something changed."""
        bound, functions, classes, names = [], [], [], []
        for mod in self.modules:
            namespace = _MODULE_DICT(mod)
            name = namespace.get("__name__", "?")
            bound.append((sys.modules, name, sys.modules.get(name)))
            if name.split(".")[0] in ("minigrad", "grading"):
                names.append((namespace, self.state[f"{name}.<names>"]))
            for attr, value in list(namespace.items()):
                if type(value) in _PLAIN_TYPES:
                    continue
                bound.append((namespace, attr, value))
                _hold_code(value, functions)
                if issubclass(type(value), type) and _CLASS_DICT(value).get("__module__") == name:
                    class_dict = _CLASS_DICT(value)
                    classes.append((class_dict, class_dict.get("__module__")))
                    for k, v in list(class_dict.items()):
                        if k in ("__dict__", "__weakref__", "__doc__", "__module__") or type(v) in _PLAIN_TYPES:
                            continue
                        bound.append((class_dict, k, v))
                        _hold_code(v, functions)
        return bound, functions, classes, names

    def _same(self) -> bool:
        """Whether every object `_take` identified is still the one held (a fast test:
        C loops over the held lists)."""
        bound, functions, classes, names = self.held
        missing = _MISSING
        for where, key, value in bound:
            if where.get(key, missing) is not value:
                return False
        for fn, code, defaults, kwdefaults, cells in functions:
            if fn.__code__ is not code or fn.__defaults__ is not defaults \
                    or fn.__kwdefaults__ is not kwdefaults:
                return False
            if cells:  # by identity: no __eq__ of what a cell holds runs here
                now = _cell_values(fn)
                if len(now) != len(cells) or any(a is not b for a, b in zip(now, cells)):
                    return False
        for class_dict, module in classes:
            now = class_dict.get("__module__", missing)
            if type(now) is not str or now != module:
                return False
        for namespace, expected in names:
            if frozenset(k for k, v in namespace.items()
                         if type(v) not in (types.ModuleType, GuardedModule)) != expected:
                return False
        return True

    def _take(self):
        state = {}
        for mod in self.modules:
            namespace = _MODULE_DICT(mod)
            name = namespace.get("__name__", "?")
            state[f"sys.modules[{name!r}]"] = id(sys.modules.get(name))
            if name.split(".")[0] in ("minigrad", "grading"):
                state[f"{name}.<names>"] = frozenset(
                    k for k, v in namespace.items() if type(v) not in (types.ModuleType, GuardedModule))
            for attr, value in list(namespace.items()):
                if type(value) in _PLAIN_TYPES:
                    continue
                key = f"{name}.{attr}"
                state.update(_code_entries(key, value))
                if issubclass(type(value), type) and _CLASS_DICT(value).get("__module__") == name:
                    for k, v in list(_CLASS_DICT(value).items()):
                        if k in ("__dict__", "__weakref__", "__doc__", "__module__"):
                            continue
                        if type(v) in _PLAIN_TYPES:
                            continue
                        state.update(_code_entries(f"{key}.{k}", v))
        return state

    def changed(self) -> list[str]:
        # NumPy's lazy submodules may add names; minigrad and the grader gain none but modules
        if self._same():
            return []
        now = self._take()
        found = sorted(k for k in self.state if self.state[k] != now.get(k))
        # an object replaced by one that took its id (only the held lists can tell)
        return found or ["a function, class or module replaced by another object"]


# The standard library's modules whose functions the grader's own code calls while a
# notebook is graded, inside the audit hook (where every event passes) or between its
# checks and its messages: ``os.path`` for the files a notebook opens, ``base64`` and
# ``binascii`` for array answers, ``json`` for every message. A notebook that replaced one
# of their functions (``base64.b64encode``, ``os.fsdecode``, ``json._default_encoder``)
# would run its own code there: they are guarded like NumPy's.
STDLIB_GUARDED = ("os", "posixpath", "genericpath", "stat", "base64", "binascii", "json",
                  "json.encoder", "json.decoder", "json.scanner", "traceback", "types", "signal")


def guarded_modules():
    """builtins, NumPy's, minigrad's and the grader's modules, and this one where it runs as
    ``__main__`` (a notebook's ``import __main__`` reaches it)."""
    mods = [builtins]
    for name, mod in sorted(sys.modules.items()):
        if mod is None:
            continue
        root = name.split(".")[0]
        if root in ("numpy", "minigrad", "grading") or name in STDLIB_GUARDED:
            mods.append(mod)
    main = sys.modules.get("__main__")
    if main is not None and _MODULE_DICT(main).get("__file__") == __file__ and main not in mods:
        mods.append(main)
    return mods


# Audit events refused when code of the notebook is on the stack (the notebook sees the
# refusal as a RuntimeError in that cell or test).
REFUSED_PREFIXES = ("ctypes.", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn",
                    "os.system", "subprocess.", "os.kill", "os.killpg", "signal.pthread_kill",
                    "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                    "sys._current_frames", "sys._getframe", "object.__getattr__", "sys.setprofile",
                    "sys.settrace", "socket.", "pty.", "os.setuid", "os.setgid", "object.__setattr__")

# Replacing these on a function would change what the grader's own functions do.
FUNCTION_INTERNALS = ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__")

# The attributes that lead from a function or generator to its code (and so to its source:
# ``dis``, ``inspect.getsource``); audited as "object.__getattr__". Refused on the grader's
# secret code (the tests and the earlier questions' reference) while a notebook's code runs.
CODE_ATTRIBUTES = ("__code__", "__defaults__", "gi_code", "cr_code", "ag_code")

# Files of /proc that a notebook may open while it runs: nothing that holds a process's
# memory (``mem``, ``pagemap``), where the tests and the reference are.
PROC_FILES_ALLOWED = ("stat", "statm", "status", "cgroup", "limits", "maps", "mountinfo", "mounts",
                      "cmdline", "comm", "cpuinfo", "meminfo", "loadavg", "uptime", "version")


def refused_path(path) -> str:
    """Why a notebook may not open ``path`` ("" when it may): a process's memory, under any
    name that leads there (``/proc/self/mem``, ``/proc/<pid>/task/<tid>/mem``, a path
    relative to a folder of /proc, a symbolic link)."""
    import os.path as osp

    if isinstance(path, int):
        return ""
    try:
        text = os.fsdecode(path)
    except (TypeError, ValueError):
        return ""
    base = osp.basename(osp.normpath(text))
    if base in ("mem", "pagemap", "kcore", "kmem"):
        return f"opening {text!r} (a process's memory)"
    real = osp.realpath(text)
    if real.startswith("/proc/") and osp.basename(real) not in PROC_FILES_ALLOWED \
            and not osp.isdir(real):
        return f"opening {text!r} (under /proc)"
    return ""


def _codes_of(value, out, depth=0):
    code = getattr(value, "__code__", None) if isinstance(value, types.FunctionType) else None
    if code is not None:
        _nested(code, out)
        wrapped = getattr(value, "__wrapped__", None)  # a decorated function's own code
        if isinstance(wrapped, types.FunctionType) and depth < 3:
            _codes_of(wrapped, out, depth + 1)
    if isinstance(value, (staticmethod, classmethod)):
        _codes_of(value.__func__, out, depth)
    elif isinstance(value, property):
        for f in (value.fget, value.fset, value.fdel):
            _codes_of(f, out, depth)
    elif isinstance(value, type) and depth < 2:
        for v in list(vars(value).values()):
            _codes_of(v, out, depth + 1)


def _nested(code, out):
    if id(code) in out:
        return
    out[id(code)] = code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _nested(c, out)


def trusted_codes() -> dict:
    """Every code object alive now (the grader's, the handout's imports, the environment's),
    by id (the dict keeps them alive, so an id is never reused): functions found on the
    heap, with the code nested in them."""
    out = {}
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            _nested(obj.__code__, out)
        elif isinstance(obj, types.CodeType):
            _nested(obj, out)
    for mod in list(sys.modules.values()):
        if mod is None:
            continue
        try:
            items = list(vars(mod).values())
        except TypeError:
            continue
        for v in items:
            _codes_of(v, out)
    return out


def preload(given: list[str]) -> None:
    """Import what the handout imports (only its import statements), before the snapshot
    of trusted code is taken: the libraries a notebook is meant to use are trusted."""
    import ast

    for node in handout_imports(given):
        exec(compile(ast.Module([node], []), "<handout imports>", "exec"), {})
    if "torch" in sys.modules:  # what torch imports lazily the first time a checkpoint runs
        import torch._dynamo  # noqa: F401
        import torch.utils.checkpoint  # noqa: F401


class Registries:
    """minigrad's hook lists and the ledger's trackers and fields, as they were before the
    notebook ran. ``restore()`` puts them back (what a notebook registered and left, an
    observer that would watch the grader's own measurements, is dropped before every
    test); ``problem()`` names an entry that notebook code made and that is live now
    (checked after the cells, at each answer and after each test)."""

    def __init__(self, trusted: dict):
        from minigrad import hooks, memory

        self.trusted, self.hooks, self.memory = trusted, hooks, memory
        self.ledger = memory._LEDGER
        self.lists = {f"hooks.{k}": v for k, v in hooks._HOOKS.items()}
        self.lists.update({"SAVED_HOOKS": hooks.SAVED_HOOKS, "BACKWARD_TASKS": hooks.BACKWARD_TASKS,
                           "_DRY_RUNS": hooks._DRY_RUNS, "ledger.trackers": self.ledger.trackers})
        self.saved = {k: list(v) for k, v in self.lists.items()}
        self.fields = dict(_OBJECT_DICT(self.ledger))

    def restore(self) -> None:
        for k, lst in self.lists.items():
            list.__setitem__(lst, slice(None), self.saved[k])
        fields = _OBJECT_DICT(self.ledger)
        for k in [k for k in fields if k not in self.fields]:
            del fields[k]
        for k, v in self.fields.items():
            if k != "phase":
                fields[k] = v
        fields["phase"] = None

    def _trusted_callable(self, entry) -> bool:
        kind, code = type(entry), None
        if kind is types.FunctionType:
            code = entry.__code__
        elif kind is types.MethodType and type(entry.__func__) is types.FunctionType:
            code = entry.__func__.__code__
        else:
            for klass in _CLASS_MRO(kind):  # never a metaclass's __mro__ property (it would run)
                call = _CLASS_DICT(klass).get("__call__")
                if call is not None:
                    code = call.__code__ if type(call) is types.FunctionType else None
                    break
        return code is not None and id(code) in self.trusted

    def problem(self) -> str:
        table = self.hooks._HOOKS
        if type(table) is not dict or set(dict.keys(table)) != {k[6:] for k in self.lists if k.startswith("hooks.")} \
                or any(dict.get(table, k[6:]) is not v for k, v in self.lists.items() if k.startswith("hooks.")):
            return "minigrad's hook table was changed (a list replaced or added)"
        fields = _OBJECT_DICT(self.ledger)
        if set(fields) != set(self.fields) or any(fields[k] is not v for k, v in self.fields.items()
                                                   if k != "phase"):
            return "minigrad's ledger was changed (a field replaced or added)"
        for k, lst in self.lists.items():
            if k == "_DRY_RUNS":
                continue
            for entry in list.__iter__(lst):
                if any(entry is e for e in self.saved[k]):
                    continue
                if k == "ledger.trackers" and type(entry) is self.memory.Tracker:
                    continue
                if k != "ledger.trackers" and self._trusted_callable(entry):
                    continue
                return f"an observer the notebook made was registered in minigrad ({k})"
        return ""


_OBJECT_DICT = lambda obj: object.__getattribute__(obj, "__dict__")  # noqa: E731 - never a property


TRACKER_FIELDS = frozenset(("start", "peak", "end", "timeline", "counts", "flops", "flops_by_op",
                            "_record"))


def make_guard(trusted: dict, grader: dict, on_answer=None, guarded: set = frozenset(), tags=None,
               refused_writes=None, checks=None, secret=None):
    """Install the audit hook; returns (enter, leave, trust, answers): the notebook phase
    begins and ends, ``trust(code, secret=False)`` adds code the grader compiled (tests,
    handout, fixtures; ``secret``: the tests and the fixtures, whose code objects the
    notebook may call but never read; ``secret=``, a dict of the caller's, gets them), and
    ``answers`` collects a test's answers.

    In the notebook phase an event of ``REFUSED_PREFIXES`` is refused unless the frame that
    raised it runs the grader's code (``grader``: this package, ``minigrad.testing``, what
    it compiled) or no frame on the stack runs code outside ``trusted`` (every module loaded
    before the notebook ran): the notebook's code cannot reach frames, the heap, new
    processes or ``ctypes``, directly or through a library.

    It also answers `GuardedModule`'s events: a write to a guarded module is checked
    (``module_write``) and made here, between ``tags.before`` and ``tags.after`` (so that
    it is the one write the namespace's expected version tag takes in); a refused one is
    added to ``refused_writes`` (a list of the caller's).

    From the moment it is installed it keeps, out of the notebook's reach, its own copy of
    minigrad's ledger (``minigrad.memory.LEDGER_EVENT``, taken in only when the ledger's own
    method raised it for minigrad's engine; a buffer counted as freed only when every array
    object watched for it is freed) and, while a test runs, of every tracker the test enters
    (``TRACKER_EVENT``): start, peaks, end and timeline computed from its own live bytes,
    op counts and FLOPs. ``checks`` (a list of the caller's) gets a function that says
    which tracker differs from that copy in any field (a notebook that edited the tracker
    the test reads, gave it an attribute of its own, or lowered the ledger's own numbers),
    or which ledger or tracker event was forged (the ledger's methods, ``memory.release``
    or ``hooks.tell`` called by the notebook), "" when none."""
    state = [False]  # in the notebook phase
    # per thread: inside the hook's own work (where the hook's own events pass); reading the
    # raiser of an event there. A thread of the notebook's racing the hook is never inside.
    inside: dict = {}
    reading: dict = {}
    walking: dict = {}  # per thread: the frame whose f_back the hook's own walk reads now
    from _thread import get_ident as ident
    refused_writes = [] if refused_writes is None else refused_writes
    write_codes = frozenset(id(_CLASS_DICT(GuardedModule)[k].__code__) for k in ("__setattr__", "__delattr__"))
    builtin_names = frozenset(vars(builtins))
    tags_before, tags_after = (tags.before, tags.after) if tags is not None else (None, None)
    getframe, refused = sys._getframe, REFUSED_PREFIXES
    # id -> code: the tests' and the fixtures' (the reference of earlier questions)
    secret = {} if secret is None else secret
    code_attributes, function_type, path_refusal = CODE_ATTRIBUTES, types.FunctionType, refused_path
    frame_events = ("sys._getframe", "object.__getattr__")
    write_event, read_event = WRITE_EVENT, READ_EVENT
    leaky = leaky_codes()
    answer_event, canonical, compare = minigrad.testing.ANSWER_EVENT, minigrad.testing.canonical, minigrad.testing.compare
    answer_error, reference_value = minigrad.testing.AnswerError, minigrad.testing.REFERENCE
    collect = [None, False]  # the answers of the test that runs; whether to check `expected`
    from minigrad import hooks as _hooks_module
    from minigrad import memory as _memory
    from minigrad import autograd as _autograd_module
    from minigrad import tensor as _tensor_module

    ledger_event = _memory.LEDGER_EVENT
    class_write_event, class_write_code = kit.CLASS_WRITE_EVENT, id(kit._set_attrs.__code__)
    class_write_caller = id(kit.library_refused.__wrapped__.__code__)
    tracker_event, tracker_type, counter_type = _memory.TRACKER_EVENT, _memory.Tracker, _memory.Counter
    event_type = _memory.Event
    phases, tracker_fields = tuple(_memory.PHASES), TRACKER_FIELDS
    _int, _str, _dict, _list, _sum = int, str, dict, list, sum

    def plain_bytes(d):
        """A copy of a dict of str -> int, read without running code; None if it is not one."""
        if type(d) is not _dict:
            return None
        out = {}
        for k, v in _dict.items(d):
            if type(k) is not _str or type(v) is not _int:
                return None
            out[k] = v
        return out

    # --- the grader's own copy of the ledger, from install to the end of the process -----
    # A change of category and an op are taken in only if the ledger's (the tracker's) own
    # method raised them, called by minigrad's engine (a node saving or releasing, a
    # gradient set, an op run) through the hook registry: a notebook calling
    # ``memory.release``, ``memory.hold``, ``hooks.tell`` or ``hooks.release_role`` itself
    # is named. A buffer counted as freed is taken in only if every array object the grader
    # saw the ledger watch for it is freed (``_LEDGER._dead``, ``_freed`` called directly);
    # a buffer counted and a watched object only add (a forged one makes the copy differ).
    ledger_methods = _CLASS_DICT(_memory._Ledger)
    code_of = {k: id(ledger_methods[k].__code__) for k in
               ("_entry", "_recategorize", "_dead", "_watch_until_freed", "register", "hold",
                "release", "op", "_freed")}
    c_recat = code_of["_recategorize"]
    c_event = id(_CLASS_DICT(tracker_type)["_event"].__code__)
    c_track = id(_memory.track.__wrapped__.__code__)
    dispatch = frozenset(list(code_of.values()) + [id(f.__code__) for f in (
        _hooks_module.tell, _hooks_module.hold_role, _hooks_module.release_role)])
    package = os.path.dirname(os.path.abspath(_memory.__file__)) + os.sep
    engine = frozenset(k for k, code in list(trusted.items())
                       if k not in dispatch and str(code.co_filename).startswith(package))
    entry_type, categories = _memory._Entry, tuple(_memory.CATEGORIES)
    weakref_type = type(_memory.weakref.ref(_memory.track))
    entry_nbytes, entry_cat = entry_type.nbytes.__get__, entry_type.cat.__get__
    ledger_shadow: dict = {}  # id(entry) -> [entry, nbytes, category, [weak references]]
    live = _dict.fromkeys(categories, 0)  # the grader's live bytes by category
    shadows: dict = {}  # id(tracker) -> record (a list, below): this test's trackers
    active: list = []  # the records of the trackers entered and not yet left
    forged: list = []

    def forge(why):
        if not forged:
            forged.append(why)

    # A packed saved entry lets go of its arrays only for the node that holds it: its
    # ``release`` called by ``Context.release``, its ``drop_unpacked`` by a node's backward
    # or by that ``release``. Called by hand (``ctx.saved[0].release()`` before backward,
    # the node still holding the entry), the activations would drop while the node keeps
    # them: from_engine checks these two methods' callers, frame by frame.
    packed_methods = _CLASS_DICT(_autograd_module._Packed)
    c_packed_release = id(packed_methods["release"].__code__)
    c_context_release = id(_CLASS_DICT(_tensor_module.Context)["release"].__code__)
    engine_callers = {
        c_packed_release: frozenset([c_context_release]),
        id(packed_methods["drop_unpacked"].__code__): frozenset(
            [id(_tensor_module._run_node.__code__), c_packed_release])}

    def from_engine(frame) -> bool:
        """Whether the frame above the ledger's methods and the hook registry's runs
        minigrad's own code (``frame``: the raiser's caller), and, for a packed entry's
        release, was called by the engine (``engine_callers``). Each ``f_back`` read raises
        an audit event, passed at once for the frame named in ``walking`` (no other code
        can hold that frame object: a finalizer running meanwhile is checked as anywhere)."""
        me = ident()
        try:
            while frame is not None and id(frame.f_code) in dispatch:
                walking[me] = frame
                frame = frame.f_back
            if frame is None or id(frame.f_code) not in engine:
                return False
            callers = engine_callers.get(id(frame.f_code))
            while callers is not None:
                walking[me] = frame
                frame = frame.f_back
                if frame is None or id(frame.f_code) not in callers:
                    return False
                callers = engine_callers.get(id(frame.f_code))
            return True
        finally:
            walking[me] = None

    def ledger_start():
        """The ledger as the hook is installed (no notebook code has run)."""
        ledger = _memory._LEDGER
        by_key = {}
        for key, e in _dict.items(ledger.entries):
            if type(e) is entry_type and type(entry_nbytes(e)) is _int and entry_cat(e) in live:
                ledger_shadow[id(e)] = by_key[key] = [e, entry_nbytes(e), entry_cat(e), []]
                live[entry_cat(e)] += entry_nbytes(e)
        for r, key in _dict.values(ledger._watch):
            known = by_key.get(key)
            if known is not None and type(r) is weakref_type:
                known[3].append(r)

    pending = [None]  # an entry "new" counted whose category may change next (in hold)

    def flush():
        """The peaks of the state a tracker observed: after "new" and no other change."""
        if pending[0] is not None:
            pending[0] = None
            peaks_now()

    def peaks_now():
        if not active:
            return
        total = _sum(live.values())
        for record in active:
            peak = record[2]
            for c, v in _dict.items(live):
                if v > peak[c]:  # noqa: PLR1730 - no builtin looked up here
                    peak[c] = v
            if total > peak["total"]:  # noqa: PLR1730
                peak["total"] = total

    # --- which node saved what: a release is taken in only from the node that saved ---
    # ``Context.save_for_backward``, ``Context.release`` and the backward of one node raise
    # LEDGER_EVENT with the node. The copy keeps, per node, a weak reference, the ids of
    # what it saved (ids, not the arrays: the copy must not keep them alive; the node keeps
    # its tuple, so the ids stay its arrays' while it lives) and whether it released. A
    # release of a node that never saved (a notebook's ``Context()`` given a real node's
    # arrays), of other arrays than it saved, a second release (a released node's
    # ``saved``/``released`` put back) or a backward through a released node is forged.
    # One dict operation per node and event; dead nodes are pruned as the dict grows.
    c_saved = id(_CLASS_DICT(_tensor_module.Context)["save_for_backward"].__code__)
    nodes: dict = {}  # id(node) -> [weak reference, ids of what it saved, released]
    prune_at = [4096]
    packed_plain = type(None)

    def holds(saved) -> bool:
        """Whether a saved tuple holds anything a release lowers (an array, a packed one)."""
        return any(type(s) is not packed_plain for s in saved)

    def shadow_node(kind, node, args):
        # Only a record's making reads the raiser (each frame read costs audit events): a
        # release or backward event the notebook raises itself can only forge against it.
        if kind == "node-saved":
            if len(args) != 3 or type(args[2]) is not tuple or not holds(args[2]) \
                    or id(getframe(3).f_code) != c_saved:
                return
            if len(nodes) >= prune_at[0]:
                for k in [k for k, rec in _dict.items(nodes) if rec[0]() is None]:
                    del nodes[k]
                prune_at[0] = max(4096, 2 * len(nodes))
            try:
                ref = weakref_type(node)
            except TypeError:
                return
            nodes[id(node)] = [ref, tuple([id(s) for s in args[2]]), False]
            return
        known = nodes.get(id(node))
        alive = None if known is None else known[0]()
        if known is not None and alive is not node and (alive is not None or known[2]):
            known = None  # another node at a freed node's address (dead and unreleased: a
            # node the collector frees in a cycle, whose weak reference dies first)
        if kind == "node-backward":
            # (a released node that says so raises "backward a second time": not forged; a
            # dead reference is another node's, one that saved nothing, at the same address)
            if alive is node and known[2] and len(args) == 3 and args[2] is False:
                forge("backward ran through a node whose saved arrays the ledger counted as "
                      "released (its saved arrays put back)")
            return
        if kind != "node-release" or len(args) != 3 or type(args[2]) is not tuple \
                or not holds(args[2]):
            return
        if known is None:
            forge("a node released arrays it never saved (a Context the notebook made, "
                  "given another node's saved arrays)")
        elif known[2]:
            forge("a node released its saved arrays twice (its saved arrays put back after "
                  "a release)")
        elif tuple([id(s) for s in args[2]]) != known[1]:
            forge("a node released other arrays than it saved")
        else:
            known[2] = True

    def shadow_ledger(args):
        if len(args) >= 2 and type(args[0]) is _str and args[0][:5] == "node-":
            shadow_node(args[0], args[1], args)
            return
        if len(args) < 2 or type(args[1]) is not entry_type:
            return
        kind, e = args[0], args[1]
        # "new" and "watch" only add (bytes, a weak reference that must die too), and "dead"
        # is checked against the weak references: their raiser is not read (each frame
        # read costs audit events). A role's change is checked up to the engine.
        if kind == "dead":
            flush()
            known = ledger_shadow.get(id(e))
            if known is None or known[0] is not e:
                return
            refs = known[3]
            if not refs or any(r() is not None for r in refs):
                forge("the ledger counted as freed an array that is still alive (its methods "
                      "or records changed by the notebook)")
                return
            live[known[2]] -= known[1]
            del ledger_shadow[id(e)]
            peaks_now()
            return
        if kind == "new" and len(args) == 3 and type(args[2]) is _int:
            flush()
            ledger_shadow[id(e)] = [e, args[2], "temporaries", []]
            live["temporaries"] += args[2]
            pending[0] = e  # in hold, the category's change follows before the tracker looks
            return
        known = ledger_shadow.get(id(e))
        if known is None or known[0] is not e:
            return
        if kind == "watch" and len(args) == 3 and type(args[2]) is weakref_type:
            refs = known[3]
            if len(refs) > 8:
                refs[:] = [r for r in refs if r() is not None]
            refs.append(args[2])
        elif kind == "cat" and len(args) == 3 and type(args[2]) is _str and args[2] in live:
            raiser = getframe(2)
            if id(raiser.f_code) != c_recat or not from_engine(raiser.f_back):
                forge("the ledger's methods were called by code other than minigrad's engine (a "
                      "notebook's call of memory.hold/release/register, _LEDGER's methods, "
                      "hooks.tell, or a packed saved entry's release)")
                return
            if pending[0] is e:
                pending[0] = None
            else:
                flush()
            live[known[2]] -= known[1]
            live[args[2]] += known[1]
            known[2] = args[2]
            peaks_now()

    def live_now():
        now = _dict(live)
        now["total"] = _sum(live.values())
        return now

    # a record: [tracker, start, peak, end, counts, flops, flops_by_op, timeline or None, record]
    def shadow(args):
        if len(args) < 2 or type(args[1]) is not tracker_type:
            return
        kind, tracker = args[0], args[1]
        flush()
        raiser = getframe(2)
        if id(raiser.f_code) != (c_track if kind in ("enter", "exit") else c_event) \
                or (kind == "event" and not from_engine(raiser.f_back)):
            forge("a tracker event that no tracker method raised for minigrad's engine")
            return
        if kind == "enter":
            if collect[0] is not None:
                fields = _OBJECT_DICT(tracker)
                timeline = [] if _dict.get(fields, "_record") is True else None
                record = [tracker, live_now(), live_now(), None, {p: {} for p in phases},
                          _dict.fromkeys(phases, 0), {p: {} for p in phases}, timeline,
                          _dict.get(fields, "_record")]
                shadows[id(tracker)] = record
                active.append(record)
            return
        record = shadows.get(id(tracker))
        if record is None or record[0] is not tracker:
            return
        if kind == "exit":
            record[3] = live_now()
            active[:] = [r for r in active if r is not record]
        elif kind == "event" and len(args) == 5:
            phase, op, flops = args[2], args[3], args[4]
            if type(phase) is not _str or type(op) is not _str or type(flops) is not _int \
                    or phase not in record[4]:
                forge("a tracker event that no tracker method raised for minigrad's engine")
                return
            record[4][phase][op] = record[4][phase].get(op, 0) + 1
            if flops:
                record[5][phase] += flops
                record[6][phase][op] = record[6][phase].get(op, 0) + flops
            if record[7] is not None:
                record[7].append((phase, op, live_now(), flops))

    def same_counters(got, want) -> bool:
        return type(got) is _dict and set(_dict.keys(got)) == set(want) \
            and all(type(_dict.get(got, p)) is counter_type
                    and plain_bytes(_dict(_dict.get(got, p))) == {k: v for k, v in want[p].items()}
                    for p in want)

    def same_timeline(got, want) -> bool:
        if type(got) is not _list or len(got) != len(want):
            return False
        for event, (phase, op, at, flops) in zip(_list(got), want):
            if type(event) is not event_type:
                return False
            fields = _OBJECT_DICT(event)
            if _dict.get(fields, "phase") != phase or type(_dict.get(fields, "phase")) is not _str \
                    or type(_dict.get(fields, "op")) is not _str or _dict.get(fields, "op") != op \
                    or type(_dict.get(fields, "flops")) is not _int or _dict.get(fields, "flops") != flops \
                    or plain_bytes(_dict.get(fields, "live")) != at:
                return False
        return True

    def tracker_problem() -> str:
        flush()
        if forged:
            return forged[0]
        for tracker, start, peak, end, counts, flops, by_op, timeline, keep in _list(_dict.values(shadows)):
            if type(tracker) is not tracker_type:
                return "a tracker of the ledger was given another class while a test measured"
            fields = _OBJECT_DICT(tracker)
            if not set(_dict.keys(fields)) <= tracker_fields:
                return "a tracker of the ledger was given an attribute of the notebook's while a test measured"
            got_end = _dict.get(fields, "end")
            if plain_bytes(_dict.get(fields, "start")) != start \
                    or plain_bytes(_dict.get(fields, "peak")) != peak \
                    or (plain_bytes(got_end) != end if end is not None else got_end is not None) \
                    or plain_bytes(_dict.get(fields, "flops")) != flops \
                    or not same_counters(_dict.get(fields, "counts"), counts) \
                    or not same_counters(_dict.get(fields, "flops_by_op"), by_op) \
                    or _dict.get(fields, "_record") is not keep \
                    or (timeline is not None and not same_timeline(_dict.get(fields, "timeline"), timeline)):
                return ("a tracker of the ledger was edited while a test measured (its start, peaks, end, "
                        "timeline, op counts or FLOPs are not what the grader's own copy of the ledger says)")
        return ""

    ledger_start()

    if checks is not None:
        checks.append(tracker_problem)

    def record(args):
        # No code of the notebook's may run here (every event passes while the hook runs):
        # only exact types are read (``canonical`` too), never converted through a method.
        key, actual, expected, how, rtol, atol, msg = args
        entry = {"key": key if type(key) is str else "?",
                 "compare": how if type(how) is str and how in ("equal", "close") else "equal",
                 "rtol": float(rtol) if type(rtol) in (int, float) else 0.0,
                 "atol": float(atol) if type(atol) in (int, float) else 0.0,
                 "msg": msg[:2000] if type(msg) is str else ""}
        try:
            entry["value"] = canonical(actual)
        except answer_error as e:
            entry["value"], entry["error"] = None, str(e)
        if collect[1]:  # the reference's run: is its answer the one its test expects?
            try:
                entry["ok"] = "error" not in entry and (expected is reference_value or not compare(
                    entry["value"], canonical(expected), entry["compare"], entry["rtol"], entry["atol"]))
            except answer_error:
                entry["ok"] = False
        collect[0].append(entry)

    def stack_trusted(depth):
        """(whether the frame ``depth`` levels above the caller of this runs trusted code,
        whether every frame from there up does): notebook code may pass its own arguments
        through a trusted library (``functools.update_wrapper``, ``string.Formatter``)."""
        was = inside.get(ident())
        inside[ident()] = True
        try:
            frame = getframe(depth + 1)
            first = frame is None or id(frame.f_code) in trusted
            while frame is not None:
                if id(frame.f_code) not in trusted:
                    return first, False
                frame = frame.f_back
            return first, True
        finally:
            inside[ident()] = was

    def module_write(module, name, value):
        writer_trusted, all_trusted = stack_trusted(4)  # from the frame that wrote, up
        if all_trusted:
            return
        namespace = _MODULE_DICT(module)
        modname = namespace.get("__name__", "?")
        if writer_trusted and type(value) in (types.ModuleType, GuardedModule) \
                and _MODULE_DICT(value).get("__name__") == f"{modname}.{name}":
            return  # the import system binds a submodule the notebook imported on its package
        new = name not in namespace
        if new and name in builtin_names:
            pass  # a new global named like a builtin would change what the module's code calls
        elif name != "__class__" and value is not _DELETED and new \
                and not modname.startswith(("minigrad", "grading", "__main__")):
            return  # a name NumPy lacks (``np.float_ = np.float64``) changes no code of its
        elif name != "__class__" and type(value) in _PLAIN_TYPES and type(namespace.get(name)) in _PLAIN_TYPES:
            return
        what = f"{modname}.{name}"
        if len(refused_writes) < 3 and what not in refused_writes:
            refused_writes.append(what)
        raise RuntimeError(f"changing {what} is not allowed while a notebook is graded")

    def guarded_write(module, name, value, done):
        """Check a write to a guarded module and make it, as the one change its namespace's
        expected tag takes in: what it replaces is let go only after that (no finalizer of
        the notebook's runs in between), and a name that is not exactly a ``str`` (whose
        hash or comparison would run code) is copied to one first."""
        if id(getframe(2).f_code) not in write_codes:  # above guarded_write and the hook
            raise RuntimeError("a guarded module's write event is the guarded module's own")
        name = "".join([name])
        namespace = _MODULE_DICT(module)
        if tags_before is not None:
            tags_before(namespace)
        module_write(module, name, value)
        old = namespace.get(name)
        if value is _DELETED:
            _MODULE_DELATTR(module, name)
        else:
            _MODULE_SETATTR(module, name, value)
        if tags_after is not None:
            tags_after(namespace)
        done.append(True)
        del old

    def untrusted_on_stack(frame):
        while frame is not None:
            if id(frame.f_code) not in trusted:
                return True
            frame = frame.f_back
        return False

    hook_code = [None]  # the id of the hook's own code, set below

    def hook(event, args):
        if event == "object.__getattr__" and walking.get(ident()) is not None \
                and args[0] is walking.get(ident()):
            return  # from_engine reading f_back of the frame it holds
        if event == write_event:  # GuardedModule.__setattr__ / __delattr__, even inside the hook
            if len(args) == 4 and type(args[0]) is GuardedModule and type(args[3]) is list:
                guarded_write(*args)
            return
        if event == read_event:  # GuardedModule.__dict__: the real namespace to trusted code only
            if len(args) == 2 and type(args[1]) is list and not stack_trusted(2)[1]:
                args[1].append(True)
            return
        if event == class_write_event:  # kit's stubs on minigrad's modules and classes, and put back
            if len(args) == 2 and type(args[0]) is list and type(args[1]) is list \
                    and not inside.get(ident()) and id(getframe(1).f_code) == class_write_code \
                    and id(getframe(2).f_code) == class_write_caller \
                    and called_by(getframe(2), secret):  # kit.library_refused, in a hidden test
                writes = []
                for owner, name, value in args[0]:  # tuples kit.library_refused made
                    if type(owner) is GuardedModule:
                        writes.append((owner, "".join([name]), value, _MODULE_DICT(owner), _MODULE_SETATTR))
                    elif issubclass(type(owner), type):
                        writes.append((owner, "".join([name]), value,
                                       gc.get_referents(_CLASS_DICT(owner))[0], type.__setattr__))
                    else:
                        return  # not minigrad's: kit writes them itself, as any code would
                replaced = []  # let go after the hook's work: no finalizer runs inside it
                inside[ident()] = True
                try:
                    for owner, name, value, namespace, write in writes:
                        replaced.append(namespace.get(name))
                        if tags_before is not None:
                            tags_before(namespace)
                        write(owner, name, value)
                        if tags_after is not None:
                            tags_after(namespace)
                    args[1].append(True)
                finally:
                    inside[ident()] = False
                replaced.clear()
            return
        if event == ledger_event or event == tracker_event:
            # raised by the ledger's and the tracker's own methods (checked), even while the
            # hook works: an array freed there is freed for the grader's copy too
            was = inside.get(ident())
            inside[ident()] = True
            try:
                (shadow_ledger if event == ledger_event else shadow)(args)
            finally:
                inside[ident()] = was
            return
        if event == answer_event:
            if collect[0] is not None and not inside.get(ident()):
                inside[ident()] = True
                try:
                    record(args)
                    if on_answer is not None:
                        on_answer()
                finally:
                    inside[ident()] = False
            return
        if inside.get(ident()):
            # The hook's own work: every event passes, but only its own code's. Code that is
            # not trusted (or hands out frames) raising one now runs inside it: a signal
            # handler or a finalizer of the notebook's, or a thread of its that raced the
            # hook: it is refused as anywhere else, never let through.
            if reading.get(ident()):
                return  # the getframe just below
            reading[ident()] = True
            try:
                raiser = getframe(1)
                foreign = raiser is not None and (id(raiser.f_code) not in trusted
                                                  or id(raiser.f_code) in leaky)
                # and every frame between it and the hook's work: trusted code (ctypes'
                # own wrappers) called by a finalizer of the notebook's that the collector
                # ran inside that work is the notebook's doing
                frame = raiser
                while not foreign and frame is not None and id(frame.f_code) != hook_code[0]:
                    foreign = id(frame.f_code) not in trusted
                    frame = frame.f_back
            finally:
                reading[ident()] = False
            if not foreign:
                return
            if event.startswith(refused) or event in ("open", "os.symlink", "os.link"):
                raise RuntimeError(f"{event} is not allowed while a notebook is graded")
            return
        if event == "sys.addaudithook":  # never another hook: it would see what this one hides
            raise RuntimeError("sys.addaudithook is not allowed while a notebook is graded")
        if event == "open" or event in ("os.symlink", "os.link"):
            inside[ident()] = True
            try:
                # in a cell or a test; or anywhere notebook code is on the stack (an object of
                # its own that grader code calls: an observer, a __class__ property ...)
                if not state[0] and not untrusted_on_stack(getframe(1)):
                    return
                if event != "open":
                    raise RuntimeError(f"{event} is not allowed while a notebook is graded")
                why = path_refusal(args[0])
                if why:
                    raise RuntimeError(f"{why} is not allowed while a notebook is graded")
            finally:
                inside[ident()] = False
            return
        if not event.startswith(refused):
            return
        if event == "object.__getattr__" and len(args) >= 2 and args[1] in code_attributes:
            inside[ident()] = True
            try:
                obj, name = args[0], args[1]
                code = obj.__code__ if type(obj) is function_type else getattr(obj, name, None)
                if id(code) not in secret:
                    return
                frame = getframe(1)
                while frame is not None:
                    if id(frame.f_code) not in trusted:
                        raise RuntimeError(f"reading {name} of the grader's code is not allowed "
                                           "while a notebook is graded")
                    frame = frame.f_back
                return
            finally:
                inside[ident()] = False
        if event == "object.__setattr__" and len(args) >= 2 and args[1] == "__class__" \
                and type(args[0]) is GuardedModule:
            inside[ident()] = True
            try:
                if untrusted_on_stack(getframe(1)):
                    if len(refused_writes) < 3:
                        refused_writes.append(f"{_MODULE_DICT(args[0]).get('__name__', '?')}.__class__")
                    raise RuntimeError("changing the class of a module of minigrad, NumPy or the "
                                       "grader is not allowed while a notebook is graded")
                return
            finally:
                inside[ident()] = False
        if event == "object.__setattr__" and len(args) >= 2 and issubclass(type(args[0]), type):
            # a class of minigrad, NumPy or the grader patched (even if put back before the
            # test ends) by notebook code itself, where the interpreter raises this event for
            # a class (CPython 3.11 to 3.13 do not: the grader's classes are watched by tag)
            owner = _CLASS_DICT(args[0]).get("__module__")
            if type(owner) is str and owner.split(".")[0] in ("minigrad", "numpy", "grading"):
                inside[ident()] = True
                try:
                    if id(getframe(1).f_code) not in trusted:
                        raise RuntimeError(f"changing {owner}.{_CLASS_DICT(args[0]).get('__qualname__', '?')}"
                                           f".{args[1]} is not allowed while a notebook is graded")
                finally:
                    inside[ident()] = False
            return
        if event == "object.__setattr__":
            if len(args) < 2 or args[1] not in FUNCTION_INTERNALS:
                return
            inside[ident()] = True
            try:
                target = args[0].__code__ if type(args[0]) is function_type else None
            finally:
                inside[ident()] = False
            if target is not None and id(target) not in trusted:
                return  # a function made after the snapshot: the notebook's, or a library's it imports
        if event == "object.__getattr__" and (len(args) < 2 or args[1] not in FRAME_ATTRIBUTES):
            return  # reading __code__ and the like hands out nothing of the grader's
        inside[ident()] = True
        try:
            frame = getframe(1)
            code = id(frame.f_code)
            if code in grader:
                return
            # A library the notebook calls may look at its own caller (namedtuple, enum,
            # dataclasses do); only the ones that hand frames back are refused.
            if event in frame_events and code in trusted:
                if code not in leaky:
                    return
                caller = frame.f_back  # inspect.currentframe() called by a trusted library
                if caller is not None and id(caller.f_code) in trusted and id(caller.f_code) not in leaky:
                    return
            while frame is not None:
                if id(frame.f_code) not in trusted:
                    raise RuntimeError(f"{event} is not allowed while a notebook is graded")
                frame = frame.f_back
        finally:
            inside[ident()] = False

    def enter():
        state[0] = True

    def leave():
        state[0] = False

    def trust(code, is_secret=False):
        _nested(code, trusted)
        _nested(code, grader)
        if is_secret:
            _nested(code, secret)

    def answers(start=None, check_expected=False):
        """start=True: collect the answers of the test about to run; start=None: stop and
        return them (a list no notebook code can reach)."""
        if start:
            collect[0], collect[1] = [], bool(check_expected)
            shadows.clear()
            active.clear()
            return None
        got, collect[0] = collect[0], None
        return got

    frame = getframe(1)  # the grader's own stack now (the script's module code included)
    while frame is not None:
        _nested(frame.f_code, trusted)
        _nested(frame.f_code, grader)
        frame = frame.f_back
    hook_code[0] = id(hook.__code__)
    sys.addaudithook(hook)
    return enter, leave, trust, answers


# The attributes that lead from an object to a frame (audited as "object.__getattr__").
FRAME_ATTRIBUTES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back")

# Library code that can hand frames (or their locals) to its caller: all of inspect and
# traceback, and logging.currentframe.
LEAKY_MODULES = ("inspect", "traceback")


def leaky_codes() -> dict:
    """Code that hands frames to its caller (``inspect.currentframe``, ``traceback.walk_stack``,
    ``StackSummary.extract(..., capture_locals=True)``, ``logging.currentframe``...):
    trusted, but not to fetch frames for the notebook."""
    out = {}
    for module in LEAKY_MODULES:
        mod = sys.modules.get(module) or __import__(module)
        for v in list(vars(mod).values()):
            if getattr(v, "__module__", None) == module:  # its own, not what it imported
                _codes_of(v, out)
    logging = sys.modules.get("logging") or __import__("logging")
    _codes_of(getattr(logging, "currentframe", None), out)
    return out


def grader_codes() -> dict:
    out = {}
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name.startswith("grading") or name in ("minigrad.testing", "__main__")):
            for v in list(vars(mod).values()):
                _codes_of(v, out)
    main_fn = sys.modules["__main__"].__dict__.get("main")
    if main_fn is not None:
        _nested(main_fn.__code__, out)
    return out


def refuse_new_signal_handlers() -> str:
    """From now on no signal handler of this process (or a child's) can be changed: a
    seccomp filter (Linux, x86-64 or arm64) makes ``rt_sigaction`` fail with EPERM, so
    ``signal.signal`` raises before it installs anything. A notebook's handler would run
    wherever the main thread is when its signal comes (inside the grader's audit hook, or
    the test's own code, whose frame it is handed), and CPython raises no audit event for
    ``signal.signal`` (nor for a fresh instance of ``_signal``). The grader's own handler
    (SIGALRM, its time limit) must be in place before. Returns "" or why not."""
    import platform
    import struct

    arch = {"x86_64": (0xC000003E, 13), "aarch64": (0xC00000B7, 134)}.get(platform.machine())
    if sys.platform != "linux" or arch is None:
        return f"no seccomp filter for {sys.platform} {platform.machine()}"
    try:
        import ctypes
    except ImportError as e:
        return f"no ctypes ({e})"
    audit_arch, nr_sigaction = arch
    eperm = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
    allow = 0x7FFF0000  # SECCOMP_RET_ALLOW
    insns = [(0x20, 0, 0, 4),  # ld [arch]
             (0x15, 1, 0, audit_arch),  # jeq arch, +1
             (0x06, 0, 0, allow),  # another ABI: left as it is
             (0x20, 0, 0, 0),  # ld [nr]
             (0x15, 0, 1, nr_sigaction),  # jeq rt_sigaction
             (0x06, 0, 0, eperm),
             (0x06, 0, 0, allow)]
    prog = b"".join(struct.pack("HBBI", *i) for i in insns)
    buf = ctypes.create_string_buffer(prog)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(insns), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    if prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed (errno {ctypes.get_errno()})"
    if prctl(22, 2, ctypes.addressof(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        return f"no seccomp filter here (errno {ctypes.get_errno()})"
    return ""


def json_codec():
    """(dumps, loads) for the channel, made of json's C encoder and scanner bound now:
    nothing they run is looked up when a message is written or read (``json.dumps`` looks
    up ``json._default_encoder`` and ``JSONEncoder.encode``, a class attribute that notebook
    code can replace with no audit event, and would run it after the grader's checks, on
    the message that reports them). Python's own where ``_json`` is missing."""
    from json import decoder, encoder, scanner

    make_encoder, make_scanner = encoder.c_make_encoder, scanner.c_make_scanner
    if make_encoder is None or make_scanner is None:
        return json.dumps, json.loads

    def default(o):
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    encode = make_encoder(None, default, encoder.c_encode_basestring_ascii, None, ": ", ", ",
                          False, False, True)
    scan, join, decode = make_scanner(decoder.JSONDecoder()), "".join, bytes.decode
    _type, _len, _rstrip = type, len, str.rstrip

    def dumps(obj):
        return join(encode(obj, 0))

    def loads(line):
        text = decode(line, "utf-8") if _type(line) is bytes else line
        try:
            obj, end = scan(text, 0)
        except StopIteration:
            raise ValueError("not a JSON document") from None
        if end != _len(_rstrip(text)):
            raise ValueError("extra data after a JSON document")
        return obj

    return dumps, loads


# contextlib's frames between a ``with kit.library_refused(...)`` and the generator's
_CONTEXT_CODES = frozenset(id(f.__code__) for f in (contextlib._GeneratorContextManager.__enter__,
                                                    contextlib._GeneratorContextManager.__exit__))
ALARM_MAX_WAITS = 100  # 5 ms each: half a second at most, per alarm


def called_by(frame, callers) -> bool:
    """Whether generator ``frame`` (kit.library_refused's) was entered or exited by a
    ``with`` statement in code of ``callers`` (ids: the hidden tests' code)."""
    outer = frame.f_back
    return outer is not None and id(outer.f_code) in _CONTEXT_CODES \
        and outer.f_back is not None and id(outer.f_back.f_code) in callers


def alarm_handler(setitimer, callers):
    """The SIGALRM handler of a test's time limit: raises `TimeLimit`, unless it strikes
    inside kit's profile function (the innermost frame: an exception there makes CPython
    drop the profile function, and the test would fail for that, not for its time) or
    while kit puts minigrad's refused names in place or back for a hidden test (``callers``:
    the ids of the tests' code; a limit there would leave minigrad patched: tampering, for
    a notebook that only ran out of time). Then the alarm comes back 5 ms later, at most
    ``ALARM_MAX_WAITS`` times in a row (a notebook that gets its own code run there gains
    half a second, no more)."""
    watch_code, refused_code = kit.WATCH_CODE, kit.LIBRARY_REFUSED_CODE
    waited = [0]

    def waits(frame):
        if frame is not None and frame.f_code is watch_code:
            return True
        while frame is not None:
            if frame.f_code is refused_code:
                return called_by(frame, callers)
            frame = frame.f_back
        return False

    def on_alarm(signum, frame):
        if waited[0] < ALARM_MAX_WAITS and waits(frame):
            waited[0] += 1
            setitimer(signal.ITIMER_REAL, 0.005)
            return
        waited[0] = 0
        raise TimeLimit()
    return on_alarm


def main() -> None:
    # Everything below is bound to local names now, before the notebook's code runs: a
    # notebook that replaces these module globals or builtins changes nothing here.
    _write, _read, _dumps, _loads, _monotonic = os.write, os.read, *json_codec(), time.monotonic
    _memoryview, _max_bytes = memoryview, MAX_MESSAGE_BYTES
    _compile, _exec, _type, _len = compile, exec, type, len
    _fork, _waitpid, _kill, _exit, _sleep = os.fork, os.waitpid, os.kill, os._exit, time.sleep
    _setitimer, _format_exc = signal.setitimer, traceback.format_exception_only
    _listdir, _getpid = os.listdir, os.getpid
    # In a sandbox of its own (a PID namespace: bubblewrap), the runner may end every other
    # process there after a test: what a test started from C (no audit hook sees it), in a
    # session of its own, would otherwise hold the process limit for the next tests.
    own_namespace = os.environ.get("GRADER_OWN_PID_NAMESPACE") == "1" and os.getuid() != 0
    processes_at_start = len([p for p in os.listdir("/proc") if p.isdigit()])
    _run_probe, _question_env, _reset_random = probes.run_probe, probes.question_env, probes.reset_random
    _load_tests, _exec_cells = probes.load_tests, probes.exec_cells

    channel = os.dup(1)
    os.dup2(2, 1)  # the notebook's prints go to the log (stderr), never to the channel
    commands = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    _flush_out, _flush_err = sys.stdout.flush, sys.stderr.flush
    buf = bytearray()

    def emit(**msg):
        for flush in (_flush_out, _flush_err):
            try:
                flush()
            except BaseException:  # noqa: BLE001 - the notebook's streams are its business
                pass
        data = (_dumps(msg) + "\n").encode()
        if _len(data) > _max_bytes:
            data = (_dumps({"kind": msg.get("kind"), "test": msg.get("test"),
                            "error": "the answers are larger than the grader accepts"}) + "\n").encode()
        view = _memoryview(data)
        while view:
            n = _write(channel, view)
            view = view[n:]

    def command():
        start = 0
        while True:
            i = buf.find(b"\n", start)
            if i >= 0:
                line = bytes(buf[:i])
                del buf[:i + 1]
                return _loads(line)
            start = _len(buf)
            chunk = _read(commands, 1 << 20)
            if not chunk:
                _exit(0)
            buf.extend(chunk)

    load = command()  # first: its handout imports are part of the trusted snapshot
    preload(load["given"])
    gc.collect()
    prepare_namespaces(guarded_modules()[1:])
    fingerprint = Fingerprint(guarded_modules())
    changed = fingerprint.changed
    trusted_map = trusted_codes()
    registries = Registries(trusted_map)
    live_problem = [""]  # an observer of the notebook's found live when an answer was recorded
    guarded = guard_modules(guarded_modules())
    tags = NamespaceTags(*dict_tag_reader())
    # builtins too (never a GuardedModule: every write of a notebook's to it is tampering,
    # even one put back at once: the grader's code looks its builtins up when it runs)
    # and every class of minigrad's and the grader's: a class attribute set (and put back)
    watched_classes = grader_classes(guarded_modules()) + library_classes(guarded_modules())
    # NumPy's Python classes and the handout's libraries' (torch's): a class attribute set
    # while a test measures (``StorageWeakRef.expired``), even put back, is seen the same way
    roots = handout_roots(load["given"])
    other_classes = library_classes([m for _, m in sorted(sys.modules.items())
                                     if isinstance(m, types.ModuleType)],
                                    roots=roots, heap_only=True)
    # and the modules of the handout's libraries that are not guarded like NumPy's (torch's):
    # their names (``torch.multiprocessing.reductions.StorageWeakRef``) and sys.modules' entries
    library_modules = [(name, m) for name, m in sorted(sys.modules.items()) if type(m) is types.ModuleType
                       and name.split(".")[0] in roots and name.split(".")[0] != "numpy"]
    prepare_classes(watched_classes + other_classes)
    tags.install([m for m in guarded_modules() if type(m) is GuardedModule] + [builtins],
                 classes=watched_classes + other_classes, class_writers=class_writers(other_classes),
                 libraries=[m for _, m in library_modules])
    tag_problems = tags.problems  # a closure: nothing the notebook can replace
    sys_modules = sys.modules  # the dict itself, even if a notebook rebinds sys.modules
    refused_writes: list = []  # what notebook code tried to change in a guarded module
    if tags.view is None:
        print(f"grader: {tags.why}: a module of minigrad, NumPy or the grader patched through a "
              "function's __globals__ or object.__setattr__ and put back at once is not seen",
              file=sys.stderr, flush=True)
    guard_checks: list = []  # the hook's: a ledger tracker edited while a test measured
    secret: dict = {}  # the tests' code: kit.library_refused is theirs (see alarm_handler)
    enter, leave, trust, answers = make_guard(trusted_map, grader_codes(),
                                              on_answer=lambda: live_problem.__setitem__(
                                                  0, live_problem[0] or registries.problem()),
                                              guarded=guarded, tags=tags, refused_writes=refused_writes,
                                              checks=guard_checks, secret=secret)
    reference_run = bool(load.get("reference"))

    def trust_secret(code):
        trust(code, True)

    tasks = _len(_listdir("/proc/self/task"))

    def tampering() -> str:
        found = changed()[:3]
        written = ["grading.runner" if name == "__main__" else name for name in tag_problems()]
        if written:
            found.append(f"{', '.join(written[:3])} written past the grader's guard (a write no audit "
                         "event shows: through a function's __globals__, object.__setattr__, a raw "
                         "__dict__ or a class attribute), even if put back")
        found += [f"changing {what} (refused)" for what in refused_writes]
        for problem in (registries.problem(), live_problem[0], *[check() for check in guard_checks]):
            if problem and problem not in found:
                found.append(problem)
        if sys.gettrace() is not None or sys.getprofile() is not None:
            found.append("a trace or profile function was left installed")
        swapped = [name for name, m in library_modules if sys_modules.get(name) is not m]
        if swapped:
            found.append(f"sys.modules[{swapped[0]!r}] replaced (a module of a library the handout imports)")
        if _len(_listdir("/proc/self/task")) > tasks:
            found.append("a thread started by the notebook is still running")
        return "; ".join(found)

    on_alarm = alarm_handler(_setitimer, secret)

    def run_cells(cells, ns, skip, limit):
        errors = []
        for cell in cells:
            if cell["index"] in skip:
                errors.append(f"cell {cell['index']}: skipped (it ended or stalled the process when graded)")
                continue
            emit(kind="cell", index=cell["index"])
            try:
                code = _compile(cell["source"], f"<your cell {cell['index']}>", "exec")
            except SyntaxError as e:
                errors.append(f"cell {cell['index']}: SyntaxError: {e.msg} (line {e.lineno})")
                continue
            enter()
            _setitimer(signal.ITIMER_REAL, limit)
            try:
                _exec(code, ns)
            except TimeLimit:
                errors.append(f"cell {cell['index']}: stopped after {limit:g} s (time limit of a cell)")
            except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
                errors.append(f"cell {cell['index']}: {''.join(_format_exc(_type(e), e)).strip()[:300]}")
            finally:
                _setitimer(signal.ITIMER_REAL, 0)
                leave()
        return errors

    # The grader's one signal handler, then no other: a notebook can install none (a handler
    # of its would run inside the grader's checks, handed the frame they run in).
    signal.signal(signal.SIGALRM, on_alarm)
    why_signals = refuse_new_signal_handlers()
    if why_signals:
        # Fail closed: CPython raises no audit event for ``signal.signal``, and a handler of
        # the notebook's, installed (and put back) while a test runs, is handed the frame of
        # whatever runs when its signal comes (the test's, the grader's checks), whose locals
        # no audit hook guards. No cell runs here: the driver stops (the reference's run first).
        emit(kind="unguarded", detail=f"{why_signals}: a signal handler a notebook installs "
                                      "could not be refused, so nothing is graded here")
        _exit(0)
    student = {"__name__": "__main__", "__builtins__": builtins}
    cell_errors = run_cells(load["cells"], student, set(load.get("skip", [])), float(load["limit"]))
    problem = tampering()
    if problem:
        emit(kind="tampered", detail=problem)
        _exit(0)
    given = {"__name__": "__main__", "__builtins__": builtins}
    _exec_cells(load["given"], given, "handout", trust)
    emit(kind="loaded", cell_errors=cell_errors)

    while True:
        cmd = command()
        if cmd.get("kind") != "test":
            _exit(0)
        limit = float(cmd["limit"])
        pid, retry_until = None, _monotonic() + limit
        while pid is None:
            try:
                pid = _fork()
            except BlockingIOError:  # the process limit: another sandbox's bomb, or a leftover
                if _monotonic() > retry_until:
                    raise
                _sleep(0.1)
        if pid == 0:  # the test, in a process of its own
            try:
                os.setpgid(0, 0)
                fixtures = dict(given)
                _exec_cells(cmd["fixtures"], fixtures, "reference of an earlier question", trust_secret)
                fixtures = {n: fixtures[n] for n in cmd["fixture_names"] if n in fixtures}
                env = _question_env(student, given, fixtures, cmd["graded"])
                # only this test's function: the question's other (hidden) tests never come here
                test = _load_tests(cmd["tests"], cmd["question"], trust_secret)[cmd["test"]]
                registries.restore()  # nothing the notebook registered watches this test
                _reset_random(cmd["seed"], cmd["index"])
                answers(True, reference_run)
                enter()
                _setitimer(signal.ITIMER_REAL, limit)
                try:
                    record = _run_probe(test, env, cmd["seed"], stop=(TimeLimit,))
                except TimeLimit:
                    record = {"answers": [], "error": f"TimeoutError: the test ran past its time limit of {limit:g} s"}
                finally:
                    _setitimer(signal.ITIMER_REAL, 0)
                    leave()
                sys.setprofile(None)  # a profile the grader's kit left on when a test failed
                record["answers"] = answers()  # what the hook heard, not minigrad.testing's list
                problem = tampering()
                emit(kind="answers", test=cmd["test"], record=record, tampered=problem)
            except BaseException as e:  # noqa: BLE001
                emit(kind="answers", test=cmd["test"],
                     record={"answers": [], "error": "".join(_format_exc(_type(e), e)).strip()[:500]},
                     tampered="")
            _exit(0)
        deadline = _monotonic() + limit + 5
        status = None
        while True:
            done, status = _waitpid(pid, os.WNOHANG)
            if done:
                break
            if _monotonic() > deadline:
                try:
                    _kill(-pid, signal.SIGKILL)
                except OSError:
                    pass
                _kill(pid, signal.SIGKILL)
                _waitpid(pid, 0)
                emit(kind="stopped", test=cmd["test"], why="timeout")
                status = None
                break
            _sleep(0.01)
        if status is not None:
            try:
                _kill(-pid, signal.SIGKILL)  # anything the test left behind
            except OSError:
                pass
            emit(kind="ended", test=cmd["test"], status=status)
        if own_namespace:
            try:
                _kill(-1, signal.SIGKILL)  # every process of this sandbox but the runner (and init)
            except OSError:
                pass
            for _ in range(100):  # until the sandbox's init has reaped them: they count till then
                if _len([p for p in _listdir("/proc") if p.isdigit()]) <= processes_at_start:
                    break
                _sleep(0.02)


# The grader's classes, named as its package's (this module runs as ``__main__``, the name a
# notebook's classes have). Setting a class attribute raises no audit event (CPython 3.11 to
# 3.13): their ``__dict__`` is watched by tag instead (`grader_classes`).
TimeLimit.__module__ = Fingerprint.__module__ = Registries.__module__ = "grading.runner"
NamespaceTags.__module__ = "grading.runner"

if __name__ == "__main__":
    main()
