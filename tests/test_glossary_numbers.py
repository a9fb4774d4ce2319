"""The glossary cannot glue: the numbers it states are checked here against what the
chapters it cites compute (the stored glue of the executed cell, or the same call)."""
import re

import pytest

from bookpaths import ROOT, load_notebook

GLOSSARY = (ROOT / "book" / "glossary.md").read_text()


def entry(term: str) -> str:
    """The text of one glossary entry (its indented lines)."""
    match = re.search(rf"^{re.escape(term)}\n((?:  .*\n)+)", GLOSSARY, re.M)
    assert match, f"no glossary entry {term!r}"
    return " ".join(line.strip() for line in match.group(1).splitlines())


def stored_glue(notebook: str, name: str) -> str:
    """The value a notebook's executed cell glued under ``name``, as text."""
    (path,) = (ROOT / "notebooks").glob(f"{notebook}_*.ipynb")
    for cell in load_notebook(path)["cells"]:
        for out in cell.get("outputs", []):
            if out.get("metadata", {}).get("scrapbook", {}).get("name") == name:
                return out["data"]["application/papermill.record/text/plain"].strip("'")
    raise AssertionError(f"{path.name} glues no {name!r}")


def test_entry_reads_one_entry_only():
    text = entry("Mixed precision")
    assert text.startswith("Running most") and "NormalFloat" not in text


def test_mixed_precision_states_the_measured_ratio_of_chapter_19():
    text = entry("Mixed precision")
    assert "{ref}`chapter 19 <ch19>`" in text
    assert f"measures {stored_glue('ch19', 'ch19_amp_ratio')} times" in text


def test_mixed_precision_states_the_formula_ratio_of_chapter_22():
    pytest.importorskip("transformers")
    from bookkit import calculator

    config = calculator.PRESETS["GPT-2 (124M)"]()
    kw = dict(batch_size=8, seq_len=1024)  # chapter 22's figure (memory_by_kind)
    act = {p: calculator.estimate_training_memory(config, precision=p, **kw)["activations"]
           for p in ("fp32", "bf16-autocast")}
    text = entry("Mixed precision")
    assert "8 × 1,024 tokens" in text and "{ref}`chapter 22 <ch22>`" in text
    assert f"gives {act['bf16-autocast'] / act['fp32']:.2f} times" in text
    # Under autocast the weights stay float32: the bfloat16 copies are the extra.
    assert "weights stay float32" in text and "extra memory" in text
