"""bookkit.require: the setup cells' version check, and the declared minimum versions
(bookkit/versions.py) agreeing with pyproject.toml and requirements.txt."""
from __future__ import annotations

import sys
import tomllib

import pytest

import bookkit
from bookkit import versions
from bookkit.versions import MINIMUM, TESTED, RuntimeTooOld, parse_version, require
from bookpaths import ROOT


@pytest.mark.parametrize("text, expected", [
    ("2.13.0+cpu", (2, 13, 0)), ("0.17.1", (0, 17, 1)), ("5.0.0rc1", (5, 0, 0)),
    ("1.26", (1, 26)), ("2.4.0.dev20240101", (2, 4, 0)), ("3.10.9", (3, 10, 9)),
])
def test_parse_version(text, expected):
    assert parse_version(text) == expected


def test_parse_version_rejects_text_without_a_number():
    with pytest.raises(ValueError, match="no version number"):
        parse_version("main")


def test_require_is_silent_when_the_runtime_is_new_enough(capsys):
    require(*MINIMUM)
    assert capsys.readouterr().out == ""


def test_require_stops_with_one_line_naming_the_fix():
    with pytest.raises(RuntimeTooOld) as info:
        require("numpy", torch="99.0")
    message = str(info.value)
    assert "torch >= 99.0 (found " in message and "pip install --upgrade 'torch>=99.0'" in message
    assert "restart the runtime" in message and "\n" not in message
    # IPython prints _render_traceback_ instead of a traceback: a single line
    assert info.value._render_traceback_() == [f"RuntimeTooOld: {message}"]


def test_require_names_a_missing_package(monkeypatch):
    monkeypatch.setattr(versions, "installed_version", lambda name: None)
    with pytest.raises(RuntimeTooOld, match=r"torch >= 2\.5 \(found none\)"):
        require(torch="2.5")


def test_require_rejects_an_unknown_package():
    with pytest.raises(ValueError, match="no declared minimum"):
        require("tensorflow")


def test_require_installs_hugging_face_libraries_by_version(monkeypatch, capsys):
    """peft present but older than the minimum: install the tested set, never by presence."""
    calls = []
    monkeypatch.setattr(versions, "installed_version",
                        lambda name: {"peft": "0.10.0"}.get(name, "99.0"))
    monkeypatch.setattr(versions.subprocess, "run", lambda cmd, check: calls.append(cmd))
    monkeypatch.delitem(sys.modules, "peft", raising=False)
    require("torch", "peft")
    assert len(calls) == 1 and calls[0][:4] == [sys.executable, "-m", "pip", "install"]
    assert [f"{n}=={v}" for n, v in TESTED.items()] == calls[0][-len(TESTED):]
    assert "peft >= 0.17, found 0.10.0" in capsys.readouterr().out


def test_require_asks_for_a_restart_when_the_old_version_is_imported(monkeypatch):
    monkeypatch.setattr(versions, "installed_version",
                        lambda name: {"transformers": "4.40.0"}.get(name, "99.0"))
    monkeypatch.setattr(versions.subprocess, "run", lambda cmd, check: None)
    monkeypatch.setitem(sys.modules, "transformers", object())
    with pytest.raises(RuntimeTooOld, match="restart the runtime"):
        require("transformers")


def test_require_never_installs_torch(monkeypatch):
    monkeypatch.setattr(versions, "installed_version", lambda name: "2.1.0")
    monkeypatch.setattr(versions.subprocess, "run", lambda *a, **k: pytest.fail("pip was called"))
    with pytest.raises(RuntimeTooOld, match="torch >= 2.5"):
        require("torch")


def _requirement_floor(spec: str) -> tuple[str, str]:
    name, _, version = spec.partition(">=")
    return name.strip(), version.strip()


def test_declared_minimums_match_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [s for extra in project["optional-dependencies"].values()
                                       for s in extra]
    floors = dict(_requirement_floor(s) for s in specs if ">=" in s)
    assert {k: floors.get(k) for k in MINIMUM} == MINIMUM, \
        "pyproject.toml and bookkit/versions.py MINIMUM must declare the same minimum versions"


def test_tested_versions_are_the_pins_of_requirements_txt():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert {k: pins.get(k) for k in TESTED} == TESTED


def test_every_minimum_is_at_most_the_pinned_version():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    too_high = {k: v for k, v in MINIMUM.items() if not versions._at_least(pins[k], v)}
    assert not too_high, f"declared minimums above the pinned versions: {too_high}"


def test_bookkit_exports_require():
    assert bookkit.require is require


def test_make_compat_minimum_stack_is_the_declared_minimum():
    """scripts/compat.py's minimum stack pins a release of each declared minimum version:
    the book's (MINIMUM) and, for packages the book does not declare, a chapter's own."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import compat
    from bookpaths import cell_source, load_notebook, notebook_paths, setup_cell_requirements

    chapter_minimums = {}
    for path in notebook_paths():
        first = next(c for c in load_notebook(path)["cells"] if c["cell_type"] == "code")
        for name, version in (setup_cell_requirements(cell_source(first).strip()) or ([], {}))[1].items():
            if name not in MINIMUM:
                chapter_minimums[name] = version
    declared = {**chapter_minimums, **MINIMUM}
    pins = dict(spec.split("==") for spec in compat.STACKS["minimum"])
    assert set(MINIMUM) <= set(pins) <= set(declared), (sorted(pins), sorted(declared))
    for name, version in pins.items():
        minimum = parse_version(declared[name])
        assert parse_version(version)[:len(minimum)] == minimum, (name, version, declared[name])


def test_the_intro_declares_the_same_versions():
    """book/intro.md's version table says what bookkit/versions.py and requirements.txt say."""
    text = (ROOT / "book" / "intro.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in MINIMUM:
            rows[cells[0]] = (cells[1], cells[2])
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    expected = {name: (MINIMUM[name], pins[name].split("+")[0]) for name in MINIMUM}
    assert rows == expected


def test_require_installs_nothing_when_told_not_to(monkeypatch):
    """make compat sets BOOKKIT_NO_INSTALL: a stack must stay what it is."""
    monkeypatch.setenv("BOOKKIT_NO_INSTALL", "1")
    monkeypatch.setattr(versions, "installed_version", lambda name: {"peft": "0.10.0"}.get(name, "99.0"))
    monkeypatch.setattr(versions.subprocess, "run", lambda *a, **k: pytest.fail("pip was called"))
    with pytest.raises(RuntimeTooOld, match=r"peft >= 0\.17 \(found 0\.10\.0\)"):
        require("peft")
