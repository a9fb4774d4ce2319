"""Helpers the hidden tests import (``from grading import kit``): the grader's, never a
student's. The runner fingerprints this module before student code runs.

``refuse_library(obj, modules)`` fails a test whose graded function or class uses a part of
minigrad the rules forbid (subclassing it, naming it, or calling it while it runs);
``rng(seed, k)`` draws a test's hidden inputs from the seed the instructor built with.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import types

import numpy as np


class LibraryShortcut(AssertionError):
    """Raised when a graded answer calls a part of minigrad the rules forbid."""


def rng(seed, k: int) -> np.random.Generator:
    """The generator of hidden test ``k``: from the instructor's build seed (``make
    assignments SEED=...``); the public notebook never holds it."""
    return np.random.default_rng([int(seed or 0) & 0xFFFFFFFF, k])


def _modules(names):
    found = []
    for name in names:
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def _forbidden_objects(modules, allow=()):
    objs = {}
    for mod in modules:
        for attr, value in vars(mod).items():
            if attr.startswith("_") or f"{mod.__name__}.{attr}" in allow:
                continue
            if getattr(value, "__module__", None) == mod.__name__ and callable(value):
                objs[id(value)] = f"{mod.__name__}.{attr}"
        if mod.__name__ not in allow:
            objs[id(mod)] = mod.__name__
    return objs


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def library_uses(obj, module_names, allow=()) -> list[str]:
    """The forbidden minigrad objects that ``obj`` (a function or a class) subclasses or
    names: through its globals, closures, default values or base classes."""
    modules = _modules(module_names)
    forbidden = _forbidden_objects(modules, allow)
    found = []
    seen = set()

    def visit(value, depth=0):
        if id(value) in seen or depth > 4:
            return
        seen.add(id(value))
        if id(value) in forbidden:
            found.append(forbidden[id(value)])
            return
        if isinstance(value, type):
            for base in value.__mro__[1:]:
                if id(base) in forbidden:
                    found.append(f"subclass of {forbidden[id(base)]}")
            for v in vars(value).values():
                visit(getattr(v, "__func__", v), depth + 1)
            return
        code = getattr(value, "__code__", None)
        if code is None:
            return
        glb = getattr(value, "__globals__", {})
        names = {n for c in _codes(code) for n in c.co_names}
        for n in names:
            if n in glb:
                target = glb[n]
                if id(target) in forbidden:
                    found.append(forbidden[id(target)])
                elif isinstance(target, types.ModuleType) and target.__name__ in ("minigrad",):
                    for mod in modules:
                        short = mod.__name__.split(".")[1] if "." in mod.__name__ else None
                        if short and short in names and mod.__name__ not in allow:
                            found.append(mod.__name__)
                elif callable(target) and getattr(target, "__globals__", None) is glb:
                    visit(target, depth + 1)  # the student's own helpers
        for cell in getattr(value, "__closure__", None) or ():
            with contextlib.suppress(ValueError):
                visit(cell.cell_contents, depth + 1)
        for d in getattr(value, "__defaults__", None) or ():
            visit(d, depth + 1)

    visit(obj)
    return sorted(set(found))


def _code_key(code):
    """What a copy of a function has in common with the original (its source, recompiled,
    gives the same): bytecode, names, constants, nested code."""
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return (code.co_name, code.co_code, code.co_names, code.co_varnames, consts)


def _library_codes(modules, forbidden):
    """Code objects of the forbidden functions and methods (nested code included)."""
    codes = []
    files = {getattr(m, "__file__", None) for m in modules}

    def add(value):
        value = getattr(value, "__func__", value)
        value = getattr(value, "__wrapped__", value)  # a contextmanager's own function
        code = getattr(value, "__code__", None)
        if code is not None and code.co_filename in files:
            codes.extend(_codes(code))

    for mod in modules:
        for attr, value in vars(mod).items():
            if id(value) not in forbidden:
                continue
            if isinstance(value, type):
                for v in vars(value).values():
                    add(v)
            else:
                add(value)
    return codes


# The grader's runner watches every class and module of minigrad by its __dict__'s version
# tag: the kit's own writes (the refusing stubs, put back) are made by its audit hook, which
# takes each in as expected, all of them in one event (one write at a time, each a module's
# by the guarded class's route, cost about 75 ms per block, and a4's test makes 200
# blocks). Outside the runner (no hook answers) plain setattr.
CLASS_WRITE_EVENT = "grading.class_write"


def _set_attrs(writes: list) -> None:
    """Make ``writes``, ``[(module or class, name, value), ...]``, in order."""
    done: list = []
    sys.audit(CLASS_WRITE_EVENT, writes, done)
    if not done:
        for owner, name, value in writes:
            setattr(owner, name, value)


@contextlib.contextmanager
def library_refused(module_names, what: str, allow=()):
    """While the block runs, the forbidden parts of minigrad (every public function and
    class of these modules) cannot run: the names raise ``LibraryShortcut``, and a profile
    function watches every call, so a copy kept before the block (a list holding the
    function, ``types.FunctionType`` of its code) or a recompiled copy of its source
    (``exec(inspect.getsource(...))``) fails the test as well, when the block ends."""
    saved = []

    def refuse(qualname):
        def refused(*args, **kwargs):
            raise LibraryShortcut(f"{what} called {qualname}, which the rules forbid")
        return refused

    modules = _modules(module_names)
    forbidden = _forbidden_objects(modules, allow)
    codes = _library_codes(modules, forbidden)
    by_id = {id(c): c for c in codes}
    by_key = {_code_key(c): c for c in codes if c.co_name not in ("<lambda>", "<genexpr>", "<listcomp>")}
    seen, used = {}, []

    def watch(frame, event, arg):  # its code is WATCH_CODE: the runner's alarm waits while it runs
        if event != "call":
            return
        code = frame.f_code
        key = id(code)
        if key not in seen:
            seen[key] = (code, key in by_id or _code_key(code) in by_key)
        if seen[key][1] and len(used) < 5:
            used.append(f"{code.co_name} ({code.co_filename})")

    stubs = []
    for mod in modules:
        for attr, value in list(vars(mod).items()):
            if attr.startswith("_") or isinstance(value, types.ModuleType):
                continue
            if getattr(value, "__module__", None) != mod.__name__ or f"{mod.__name__}.{attr}" in allow:
                if id(value) in forbidden and not isinstance(value, type):  # a re-export
                    saved.append((mod, attr, value))
                    stubs.append((mod, attr, refuse(forbidden[id(value)])))
                continue
            if isinstance(value, type):
                for k in ("forward", "backward", "apply", "__call__", "__init__"):
                    if k in vars(value):
                        saved.append((value, k, vars(value)[k]))
                        stubs.append((value, k, staticmethod(refuse(f"{mod.__name__}.{attr}.{k}"))))
            elif callable(value):
                saved.append((mod, attr, value))
                stubs.append((mod, attr, refuse(f"{mod.__name__}.{attr}")))
    _set_attrs(stubs)
    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        yield
    finally:
        intact = sys.getprofile() is watch
        sys.setprofile(previous)
        _set_attrs(saved[::-1])
    if not intact:
        raise LibraryShortcut(f"{what} removed the grader's watch on minigrad's library")
    if used:
        raise LibraryShortcut(f"{what} ran minigrad's own code ({', '.join(used)}), which the rules forbid")


def _watch_code():
    """The code object of ``library_refused``'s profile function (nested in it)."""
    outer = library_refused.__wrapped__.__code__
    return next(c for c in outer.co_consts if isinstance(c, types.CodeType) and c.co_name == "watch")


WATCH_CODE = _watch_code()
# The code of ``library_refused`` itself (its generator's frame is on the stack only while
# it puts the refusing stubs in place or back, never while the test's block runs): the
# runner's time limit waits there, and only there does its hook make the stubs' writes,
# when a hidden test called it (see runner.alarm_handler and make_guard).
LIBRARY_REFUSED_CODE = library_refused.__wrapped__.__code__


def refuse_library(obj, module_names, what: str, allow=()) -> None:
    """Fail (AssertionError) if ``obj`` subclasses or names a forbidden part of minigrad
    (``allow``: qualified names the rules permit, e.g. ``"minigrad.checkpoint.checkpoint"``)."""
    uses = library_uses(obj, module_names, allow)
    assert not uses, f"{what} uses {', '.join(uses)}, which the rules of this assignment forbid"


def plan_modules() -> list[str]:
    """minigrad's planners: ``minigrad.plan`` and every module under it."""
    import pkgutil

    import minigrad.plan

    return ["minigrad.plan"] + [f"minigrad.plan.{m.name}" for m in pkgutil.iter_modules(minigrad.plan.__path__)]


def live_float_arrays(skip=()) -> dict:
    """``{id: buffer}`` of every buffer some Python object still holds (after
    ``gc.collect()``): NumPy arrays of every dtype (the arrays of floats a step stores,
    and the same bytes kept as integers, booleans or records), ``bytes``, ``bytearray``,
    ``array.array`` and what a ``memoryview`` shows; and the Python objects that can
    carry an array's bytes though they are no buffer (`CARRIERS`): text, integers
    wider than 64 bits, floats and complex numbers. Found by walking what every
    gc-tracked object references, the untracked tuples, lists and dicts on the way,
    and the elements of object arrays; a view counts as the array that owns its
    memory. What only a running frame's locals hold is not seen (nor what a code
    object's constants hold: a function's code). ``skip``: objects (an earlier
    snapshot) whose contents do not count. The name is the first one's: what a stash
    of activations holds, in whatever form.

    Example:
        >>> import numpy as np
        >>> kept = [np.ones(4), np.ones(4).tobytes(), np.ones(4).tobytes().hex()]
        >>> found = live_float_arrays().values()
        >>> [any(a is k for a in found) for k in kept]
        [True, True, True]
    """
    import array
    import gc
    from itertools import compress, filterfalse

    gc.collect()
    seen, found = {id(s) for s in skip}, {}
    frontier = gc.get_objects()  # (a snapshot dict holds only buffers: it is never tracked)
    containers = {tuple, list, dict}
    while frontier:  # per level of the heap, in C loops: with torch loaded it is large
        refs = gc.get_referents(*frontier)
        types_ = list(map(type, refs))
        kinds = set(types_)
        views = {t for t in kinds if issubclass(t, memoryview)}
        if views:  # what a memoryview shows: the object it was made from
            for v in list(compress(refs, map(views.__contains__, types_))):
                try:
                    obj = memoryview.obj.__get__(v)
                except ValueError:  # released
                    continue
                refs.append(obj)
                types_.append(type(obj))
            kinds = set(types_)
        raw = {t for t in kinds if issubclass(t, (bytes, bytearray, array.array))}
        for b in compress(refs, map(raw.__contains__, types_)):
            found[id(b)] = b
        # carriers, in C loops (the heap holds tens of thousands of strings): text,
        # floats and complex numbers all; integers wider than 64 bits
        plain = list(compress(refs, map({t for t in kinds if issubclass(t, (str, float, complex))}
                                        .__contains__, types_)))
        found.update(zip(map(id, plain), plain))
        ints = list(compress(refs, map({t for t in kinds if issubclass(t, int)}.__contains__,
                                       types_)))
        wide = list(compress(ints, map((64).__lt__, map(int.bit_length, ints))))
        found.update(zip(map(id, wide), wide))
        kinds = {t for t in kinds if issubclass(t, np.ndarray)}
        # type() and ndarray's own descriptors: no method of a subclass runs (or lies) here
        arrays = list(compress(refs, map(kinds.__contains__, types_)))
        more = []  # containers held by object arrays
        while arrays:
            a = arrays.pop()
            while issubclass(type(_BASE(a)), np.ndarray):
                a = _BASE(a)
            if issubclass(type(_BASE(a)), (bytes, bytearray)):  # np.frombuffer's
                found[id(_BASE(a))] = _BASE(a)
                continue
            kind = _DTYPE(a).kind
            if kind != "O":
                found[id(a)] = a
            elif id(a) not in seen:
                # an object array's elements are not gc referents: walk them here
                seen.add(id(a))
                items = np.ndarray.tolist(np.ndarray.ravel(a))
                arrays.extend(x for x in items if issubclass(type(x), np.ndarray))
                more.extend(x for x in items if type(x) in containers)
                found.update((id(x), x) for x in items
                             if issubclass(type(x), (bytes, bytearray, array.array))
                             or (issubclass(type(x), CARRIERS) and _carries(x)))
        untracked = list(filterfalse(gc.is_tracked, compress(refs, map(containers.__contains__, types_))))
        untracked += filterfalse(gc.is_tracked, more)
        level = dict(zip(map(id, untracked), untracked))
        new = level.keys() - seen
        seen |= new
        frontier = list(map(level.__getitem__, new))
    return found


# Python objects that can carry an array's bytes without being a buffer: text (base64,
# latin-1, reprs), integers (int.from_bytes), floats and complex numbers (one per
# element). An integer carries something only beyond 64 bits: narrower ones are counts,
# ids and sizes (a random generator's 128-bit state is a few of them, well under the slack).
CARRIERS = (str, int, float, complex)
# New carriers count only when together they hold more than this: a measured window
# holds a little of its own (the qualified names of the functions it makes, op names,
# a generator's name and 128-bit state per checkpoint: at most 480 bytes in the
# assignments' reference solutions); a3's and a7's tests that measure what is held
# run activations of 2 KiB or more, which a stash holds beyond it in any form.
CARRIER_SLACK_BYTES = 1024


def _carries(x) -> bool:
    return not issubclass(type(x), int) or int.bit_length(x) > 64


def _carrier_bytes(x) -> int:
    """Bytes of data a carrier holds: a character's width times the length of text,
    an integer's bytes, 8 per float and 16 per complex number."""
    t = type(x)
    if issubclass(t, str):
        n = str.__len__(x)
        top = ord(max(str.__iter__(x))) if n else 0
        return n * (1 if top < 0x100 else 2 if top < 0x10000 else 4)
    if issubclass(t, int):
        return (int.bit_length(x) + 7) // 8
    return 16 if issubclass(t, complex) else 8


def _buffer_bytes(b) -> int:
    """Bytes a buffer of `live_float_arrays` holds."""
    import array

    if issubclass(type(b), np.ndarray):
        return int(_NBYTES(b))
    if issubclass(type(b), array.array):
        return int(array.array.buffer_info(b)[1] * array.array.itemsize.__get__(b))
    return int(bytes.__len__(b) if issubclass(type(b), bytes) else bytearray.__len__(b))


def bytes_held_since(before: dict, *results) -> int:
    """Bytes of buffers (arrays of any dtype, bytes) held now that were
    not held at ``before`` (a :func:`live_float_arrays` snapshot), leaving out the memory of ``results`` (arrays,
    or objects with a ``data`` array: what the code under test returned). What a hook's
    closure or a stash keeps counts, whether or not the memory ledger was told; so do
    the bytes new text, wide integers, floats and complex numbers carry (`CARRIERS`),
    when together they hold more than ``CARRIER_SLACK_BYTES``.

    Example:
        >>> import numpy as np
        >>> before = live_float_arrays()
        >>> stash = [np.zeros(8, dtype=np.float32)]
        >>> bytes_held_since(before)
        32
    """
    own = set()
    for r in results:
        a = r if issubclass(type(r), np.ndarray) else getattr(r, "data", r)
        while issubclass(type(a), np.ndarray):
            own.add(id(a))
            a = _BASE(a)
    now = live_float_arrays(skip=(before,))
    new = [a for k, a in now.items() if k not in before and k not in own]
    carried = sum(_carrier_bytes(a) for a in new if issubclass(type(a), CARRIERS))
    return (sum(_buffer_bytes(a) for a in new if not issubclass(type(a), CARRIERS))
            + (carried if carried > CARRIER_SLACK_BYTES else 0))


@contextlib.contextmanager
def names_refused(fn, names, what: str):
    """While the block runs, the global ``names`` that ``fn`` sees (other questions' graded
    functions, e.g. a later question's dynamic program called by a brute force) raise
    ``LibraryShortcut`` when called; the test fails when the block ends even if the answer
    caught the exception. Names ``fn``'s namespace lacks stay absent; they are put back after.

    Example:
        >>> ns = {}
        >>> exec("def dp(): return 1\\ndef brute(): return dp()", ns)
        >>> try:
        ...     with names_refused(ns["brute"], ["dp"], "your brute"):
        ...         ns["brute"]()
        ... except LibraryShortcut as e:
        ...     print(e)
        your brute called dp, which this question must not use
        >>> ns["dp"]()
        1
    """
    space = getattr(fn, "__globals__", None)
    if not isinstance(space, dict):
        yield
        return
    saved, used = {n: space[n] for n in names if n in space}, []

    def refuse(name):
        def refused(*args, **kwargs):
            used.append(name)
            raise LibraryShortcut(f"{what} called {name}, which this question must not use")
        return refused

    for name in saved:
        space[name] = refuse(name)
    try:
        yield
    finally:
        for name, value in saved.items():
            space[name] = value
    if used:
        raise LibraryShortcut(f"{what} called {used[0]}, which this question must not use")


_BASE, _DTYPE, _NBYTES = (getattr(np.ndarray, n).__get__ for n in ("base", "dtype", "nbytes"))
