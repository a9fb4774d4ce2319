"""The glossary is linked from the chapters: every term is the target of a
``{term}`` role on at least one page, every role names a glossary term, and
scripts/link_glossary.py (which adds the links to notebooks) links only prose, only
once per term and notebook, and changes nothing the second time."""
from __future__ import annotations


import pytest

from bookpaths import ROOT, cell_source, load_module, load_notebook, notebook_paths

lg = load_module(ROOT / "scripts" / "link_glossary.py")

TERMS = lg.glossary_terms()


def page_texts() -> dict[str, str]:
    """The Markdown of every page but the glossary: notebooks' Markdown cells, book/*.md."""
    texts = {p.name: "\n".join(cell_source(c) for c in load_notebook(p)["cells"]
                               if c["cell_type"] == "markdown") for p in notebook_paths()}
    for path in sorted((ROOT / "book").rglob("*.md")):
        if path.name != "glossary.md":
            texts[str(path.relative_to(ROOT))] = path.read_text()
    return texts


@pytest.mark.parametrize("term", TERMS)
def test_term_is_linked_from_a_page(term):
    pages = [name for name, text in page_texts().items()
             if term.lower() in lg.linked_terms(text)]
    assert pages, (f"glossary term {term!r} is linked from no page: run "
                   f"python scripts/link_glossary.py notebooks/*.ipynb, or use the word in "
                   f"a chapter's prose (phrases: {lg.phrases_for(term)})")


def test_every_term_role_names_a_glossary_term():
    known = {t.lower() for t in TERMS}
    unknown = {name: sorted(lg.linked_terms(text) - known)
               for name, text in page_texts().items() if lg.linked_terms(text) - known}
    assert not unknown, f"{{term}} roles without a glossary entry: {unknown}"


def test_phrases_belong_to_glossary_terms():
    assert set(lg.PHRASES) <= set(TERMS), sorted(set(lg.PHRASES) - set(TERMS))
    assert len(TERMS) >= 20


def test_glossary_terms_are_read_from_the_block():
    text = "# G\n\n```{glossary}\nAlpha\n  first.\n\nBeta (b)\n  second\n  line.\n```\n"
    assert lg.glossary_terms(text) == ["Alpha", "Beta (b)"]


def link(text: str, term: str = "Activation") -> str:
    nb = {"cells": [{"cell_type": "markdown", "source": text, "metadata": {}}]}
    lg.link_notebook(nb, [term])
    return nb["cells"][0]["source"]


def test_links_the_first_prose_occurrence_only():
    out = link("Keep activations here.\nMore activations there.")
    assert out == ("Keep {term}`activations <Activation>` here.\n"
                   "More activations there.")


@pytest.mark.parametrize("protected", [
    "## Where activations go\n",
    "(activations)=\n",
    "`activations` is a name\n",
    "{glue:text}`ch01_activations` and {ref}`activations <ch01>`\n",
    "[the activations](https://example.org/activations)\n",
    "$activations$ in math\n",
    "```python\nactivations = []\n```\n",
    ":::{exercise}\n:label: activations\n:::\n",
    "```{literalinclude} ../x.py\n:pyobject: activations\n```\n",
    "$$\n\\text{activations}\n$$\n",
    "<span>activations</span>\n",
])
def test_never_links_outside_prose(protected):
    out = link(protected + "Then activations.")
    assert out == protected + "Then {term}`activations <Activation>`."


def test_links_inside_prose_directives_and_across_lines():
    out = link(":::{exercise}\n:label: ch01-ex\nHow many activations?\n:::\n")
    assert "How many {term}`activations <Activation>`?" in out
    out = link("We use gradient\ncheckpointing here.", "Gradient checkpointing")
    assert out == "We use {term}`gradient checkpointing <Gradient checkpointing>` here."


def test_longer_terms_first_and_words_whole():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {},
                     "source": "Selective recomputation differs from recomputation. "
                               "Unrecomputable."}]}
    lg.link_notebook(nb, ["Recomputation (replay)", "Selective recomputation"])
    assert nb["cells"][0]["source"] == (
        "{term}`Selective recomputation <Selective recomputation>` differs from "
        "{term}`recomputation <Recomputation (replay)>`. Unrecomputable.")


def test_a_verb_is_not_the_noun():
    out = link("`checkpoint_sequential` never checkpoints its last segment; the "
               "checkpoints are inputs.", "Checkpoint (activation)")
    assert "never checkpoints its" in out
    assert "the {term}`checkpoints <Checkpoint (activation)>` are" in out


def test_case_sensitive_terms():
    assert link("We revolve around it. Revolve is a schedule.", "Revolve") == (
        "We revolve around it. {term}`Revolve <Revolve>` is a schedule.")


def test_second_run_changes_nothing():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {},
                     "source": "Activations and logits; the peak and the ledger."}]}
    first = lg.link_notebook(nb, TERMS)
    once = nb["cells"][0]["source"]
    assert first and lg.link_notebook(nb, TERMS) == [] and nb["cells"][0]["source"] == once


def test_an_existing_link_is_kept():
    text = "See {term}`what is kept <Activation>`. Activations again."
    assert link(text) == text


def test_the_script_edits_only_markdown(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("The activations."),
        nbformat.v4.new_code_cell("activations = 1  # activations")])
    path = tmp_path / "ch99_x.ipynb"
    nbformat.write(nb, path)
    assert lg.main([str(path)]) == 0
    after = nbformat.read(path, as_version=4)
    assert after.cells[0].source == "The {term}`activations <Activation>`."
    assert after.cells[1].source == "activations = 1  # activations"
    assert lg.main(["--check", str(path)]) == 0
