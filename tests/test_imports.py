"""The rules of minigrad's layers (README, "How minigrad is built"), checked on its source: imports go one way (down the
layers), all at the top; torch is never imported; SciPy only by the graph planner;
``import minigrad`` loads neither matplotlib nor ``minigrad.viz``; the plan package knows
nothing about arrays (only its profile adapter imports the engine); and only the
ledger's public API is used, by the modules that measure with it.

The layers, bottom first, as the code is (README's "How minigrad is built" draws them):
the engine's switches (hooks, grad mode, argument checks), the engine (tensor), the
ledger and the random streams, autograd's torch-parity extras, the ops, checkpoint,
the executors of plans (schedules), the modules and optimizers (nn's GPT checkpoints
its blocks, so nn sits above checkpoint and schedules), the planners (plain arithmetic
on profiles), and the drawings (viz).
"""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "minigrad"
# Each module may import only modules of a lower layer (the same layer is not allowed).
LAYERS = [
    {"minigrad._validation", "minigrad.hooks", "minigrad.grad_mode", "minigrad.testing"},
    {"minigrad.tensor"},
    {"minigrad.memory", "minigrad.random"},
    {"minigrad.autograd"},
    {"minigrad.ops"},
    {"minigrad.recompute"},  # the recomputation core every executor uses
    {"minigrad.checkpoint"},
    {"minigrad.nn", "minigrad.optim"},
    {"minigrad.plan.segments", "minigrad.plan.chain", "minigrad.plan.binomial"},
    {"minigrad.plan.profile", "minigrad.plan.graph"},
    {"minigrad.plan.optimal", "minigrad.plan.checkmate"},
    {"minigrad.plan.nested"},
    {"minigrad.plan"},
    {"minigrad.dtr", "minigrad.remat"},  # run-time rematerialization, graph schedules
    {"minigrad.viz"},
]
LEVEL = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imported(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node, a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:  # `from minigrad import memory` names a module
                yield node, f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in LEVEL else node.module


@pytest.mark.parametrize("name, path", list(modules()))
def test_imports_go_down_and_stay_at_the_top(name, path):
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node, target in imported(tree):
        # SciPy and OR-Tools load only when the graph planner runs: its lazy imports
        lazy = target.startswith(("scipy", "ortools")) and name == "minigrad.plan.checkmate"
        assert id(node) in top or lazy, \
            f"{name}: import of {target} inside a function or class (line {node.lineno})"
        if name == "minigrad" or not target.startswith("minigrad"):
            continue  # the package imports everything, in order
        assert target in LEVEL, f"{name} imports {target}, which has no layer"
        assert LEVEL[target] < LEVEL[name], f"{name} (layer {LEVEL[name]}) imports {target} (layer {LEVEL[target]})"


def test_every_module_has_a_layer():
    assert {n for n, _ in modules()} - {"minigrad"} == set(LEVEL)


def _imports_of(name, path):
    return {target for _, target in imported(ast.parse(path.read_text()))}


@pytest.mark.parametrize("name, path", list(modules()))
def test_torch_is_never_imported_and_scipy_only_by_the_graph_planner(name, path):
    roots = {t.split(".")[0] for t in _imports_of(name, path)}
    assert "torch" not in roots, f"{name} imports torch (minigrad depends on NumPy only)"
    assert "scipy" not in roots or name == "minigrad.plan.checkmate", f"{name} imports scipy"
    assert "matplotlib" not in roots or name == "minigrad.viz", f"{name} imports matplotlib"


@pytest.mark.parametrize("name, path", [(n, p) for n, p in modules() if n.startswith("minigrad.plan")])
def test_the_planners_know_nothing_about_arrays(name, path):
    """Plans are plain data: a planner imports only other planners and the argument
    checks; the profile adapters (a dry run of real layers, a traced step) are the
    exceptions."""
    engine = {t for t in _imports_of(name, path)
              if t.startswith("minigrad") and not t.startswith("minigrad.plan")
              and t not in ("minigrad", "minigrad._validation")}
    assert not engine or name in ("minigrad.plan.profile", "minigrad.plan.graph"), \
        f"{name} imports {sorted(engine)}"


def test_import_minigrad_loads_no_torch_scipy_matplotlib_or_viz():
    code = ("import sys, minigrad, minigrad.plan, minigrad.plan.binomial, minigrad.plan.nested\n"
            "from minigrad import tensor, autograd, ops, memory, nn, optim, checkpoint, recompute\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'scipy', 'matplotlib')"
            " or m == 'minigrad.viz')\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported by `import minigrad`: {out.stdout.strip()}"


# Who may read the ledger's public API (track, base_buffer, category, constants): the
# profilers (plan.profile, plan.graph and the step recorder in recompute), DTR (which buffers the
# ledger counts) and the drawings. Everything else, the engine, the ops, checkpointing
# and remat (their "recompute" phase goes through hooks.in_phase), the modules and the
# optimizers, reaches the ledger only through the hook registry (minigrad.hooks).
LEDGER_READERS = {"minigrad", "minigrad.dtr", "minigrad.plan.profile", "minigrad.viz",
                  "minigrad.recompute", "minigrad.plan.graph", "minigrad.remat"}


@pytest.mark.parametrize("name, path", list(modules()))
def test_only_the_ledger_owns_its_state(name, path):
    source = path.read_text()
    if name != "minigrad.memory":
        assert "_LEDGER" not in source, f"{name} reaches into memory._LEDGER"
    tree = ast.parse(source)
    uses_memory = any(target == "minigrad.memory" for _, target in imported(tree))
    assert not uses_memory or name in LEDGER_READERS, \
        f"{name} imports minigrad.memory; tell the ledger through minigrad.hooks instead"


# The public names independent checks import: each must stay importable exactly so.
PUBLIC_NAMES = [
    ("minigrad", "grad"), ("minigrad", "Tensor"), ("minigrad", "Function"),
    ("minigrad.checkpoint", "checkpoint"), ("minigrad.checkpoint", "checkpoint_sequential"),
    ("minigrad.checkpoint", "run_schedule"), ("minigrad.memory", "track"),
    *[("minigrad.plan", n) for n in (
        "ChainProfile", "profile_chain", "sqrt_segments", "optimal_segments",
        "optimal_one_level", "revolve", "rotor", "rotor_frontier", "NestedSchedule", "Taped",
        "Checkpointed", "trace_graph", "remat", "store_all", "lower_bound", "keeping",
        "GraphSchedule")],
    ("minigrad.remat", "run"), ("minigrad.dtr", "budget"), ("minigrad.dtr", "BudgetError"),
]


@pytest.mark.parametrize("module, name", PUBLIC_NAMES)
def test_public_names_import_from_one_path(module, name):
    import importlib

    obj = getattr(importlib.import_module(module), name)
    assert callable(obj), f"{module}.{name} is {obj!r}"
    # functions and classes are defined in minigrad (not a leftover alias of another name)
    assert getattr(obj, "__module__", "").startswith("minigrad"), f"{module}.{name}"


def test_no_module_shares_its_name_with_a_function_of_its_package():
    """``import minigrad.plan.rotor`` must not give a module while ``minigrad.plan.rotor`` is
    a function (or the reverse): a package's submodule names and its attributes that are
    not modules are disjoint."""
    import importlib
    import pkgutil
    import types

    for pkg_name in ("minigrad", "minigrad.plan"):
        pkg = importlib.import_module(pkg_name)
        for m in pkgutil.iter_modules(pkg.__path__):
            value = getattr(pkg, m.name, None)
            assert value is None or isinstance(value, types.ModuleType), \
                f"{pkg_name}.{m.name} is both a module and a {type(value).__name__}"


def test_checkpoint_sequential_has_one_home():
    import minigrad.checkpoint as C
    from minigrad import nn

    assert C.checkpoint_sequential.__module__ == "minigrad.checkpoint"
    assert C.run_schedule.__module__ == "minigrad.checkpoint"
    assert nn.checkpoint_sequential is C.checkpoint_sequential
    for path in ROOT.rglob("*.py"):  # no module writes names into another
        assert "_checkpoint.checkpoint_sequential =" not in path.read_text(), path


def test_each_planner_is_one_function_with_one_adapter():
    """A planner takes layers or a `ChainProfile` through `as_profile`; no module of
    `minigrad.plan` keeps a ``*_from_profile`` twin or a ``*_reference`` restatement (those
    live in ``tests/plan_references.py``)."""
    import importlib
    import inspect
    import pkgutil

    import minigrad.plan as plan

    for m in pkgutil.iter_modules(plan.__path__):
        module = importlib.import_module(f"minigrad.plan.{m.name}")
        twins = [n for n, v in vars(module).items() if inspect.isfunction(v)
                 and (n.endswith("_from_profile") or n.endswith("_reference"))]
        assert not twins, f"minigrad.plan.{m.name} keeps {twins}"
    for name in ("optimal_segments", "optimal_one_level", "rotor"):
        source = inspect.getsource(getattr(plan, name))
        assert "as_profile(layers, x, loss, cost" in source, name
        assert "isinstance(layers, ChainProfile)" not in source, name
