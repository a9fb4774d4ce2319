"""minigrad's modules import one way (down the layers of ARCHITECTURE.md), all at the top."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "minigrad"
# Each module may import only modules of a lower layer (the same layer is not allowed).
LAYERS = [
    {"minigrad._validation", "minigrad.hooks", "minigrad.grad_mode"},
    {"minigrad.tensor"},
    {"minigrad.memory", "minigrad.random"},
    {"minigrad.autograd"},
    {"minigrad.ops"},
    {"minigrad._steprecord"},
    {"minigrad.checkpoint"},
    {"minigrad.schedules"},
    {"minigrad.nn", "minigrad.optim"},
    {"minigrad.plan.segments", "minigrad.plan.chain", "minigrad.plan.revolve"},
    {"minigrad.plan.profile", "minigrad.plan.graph"},
    {"minigrad.plan.optimal", "minigrad.plan.checkmate"},
    {"minigrad.plan.rotor"},
    {"minigrad.plan"},
    {"minigrad.dtr", "minigrad.remat"},
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
        # SciPy loads only when the graph planner runs (ARCHITECTURE.md): its one lazy import
        lazy = target.startswith("scipy") and name == "minigrad.plan.checkmate"
        assert id(node) in top or lazy, \
            f"{name}: import of {target} inside a function or class (line {node.lineno})"
        if name == "minigrad" or not target.startswith("minigrad"):
            continue  # the package imports everything, in order
        assert target in LEVEL, f"{name} imports {target}, which has no layer"
        assert LEVEL[target] < LEVEL[name], f"{name} (layer {LEVEL[name]}) imports {target} (layer {LEVEL[target]})"


def test_every_module_has_a_layer():
    assert {n for n, _ in modules()} - {"minigrad"} == set(LEVEL)


# Who may use the ledger's public API (memory.phase, track, category, constants): the
# checkpoint executors, the graph executor (remat) and DTR's rebuilds (the "recompute"
# phase; DTR also reads which buffers the ledger counts), the profilers (plan.profile,
# plan.graph and their step recorder) and the drawings. The engine,
# the ops, the modules and the optimizers reach it only through tensor's hook registry.
LEDGER_READERS = {"minigrad", "minigrad.checkpoint", "minigrad.dtr", "minigrad.plan.profile",
                  "minigrad.viz", "minigrad._steprecord", "minigrad.plan.graph", "minigrad.remat"}


@pytest.mark.parametrize("name, path", list(modules()))
def test_only_the_ledger_owns_its_state(name, path):
    source = path.read_text()
    if name != "minigrad.memory":
        assert "_LEDGER" not in source, f"{name} reaches into memory._LEDGER"
    tree = ast.parse(source)
    uses_memory = any(target == "minigrad.memory" for _, target in imported(tree))
    assert not uses_memory or name in LEDGER_READERS, \
        f"{name} imports minigrad.memory; declare roles with minigrad.hooks.hold_role instead"
