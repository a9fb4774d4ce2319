"""The HTML calculator's constants come from bookkit.calculator, through one generator.

``scripts/calculator_js_data.py`` writes the tables the JavaScript shares with Python
(choices, byte widths, the activation table, presets, the CUDA headroom) into a marked
block of ``_static/memory_calculator.js``; the stored block must be what it writes now,
and nothing outside the block may declare those names again.
"""
import re

import pytest
from bookpaths import ROOT, load_module

pytest.importorskip("transformers")

GEN = load_module(ROOT / "scripts" / "calculator_js_data.py")


def test_stored_block_is_the_generators_output():
    assert GEN.stored(GEN.JS.read_text()) == GEN.render()
    assert GEN.main(["--check"]) == 0


def test_no_shared_constant_is_declared_outside_the_block():
    text = GEN.JS.read_text()
    outside = text.replace(GEN.stored(text), "")
    again = [name for name in GEN.data() if re.search(rf"\bvar {name}\s*=", outside)]
    assert not again, f"declared outside the generated block: {again}"


def test_generated_values_are_the_python_ones():
    from bookkit import calculator

    block = GEN.render()
    assert f"var CPU_RNG_STATE_BYTES = {calculator.CPU_RNG_STATE_BYTES}n;" in block
    assert f"var CUDA_CONTEXT_BYTES = {calculator.CUDA_CONTEXT_BYTES}n;" in block
    assert '"gelu_new": [true, 3n, 3n]' in block


def test_check_reports_a_stale_block(tmp_path, monkeypatch, capsys):
    # A wrong variant: the stored block with one constant changed is caught, and
    # rewriting restores it.
    stale = tmp_path / "memory_calculator.js"
    text = GEN.JS.read_text()
    stale.write_text(text.replace("var CPU_RNG_STATE_BYTES = 5056n;",
                                  "var CPU_RNG_STATE_BYTES = 5057n;"))
    monkeypatch.setattr(GEN, "JS", stale)
    assert GEN.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert GEN.main([]) == 0 and GEN.main(["--check"]) == 0
    assert stale.read_text() == text


def test_a_missing_block_is_a_clear_error():
    with pytest.raises(ValueError, match="no generated block"):
        GEN.stored("var PRECISIONS = [];")
