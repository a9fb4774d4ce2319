"""book/_ext/typeset_math.py: the book's formulas become MathML Core when it is built, and
a formula the converter cannot handle fails the build, naming the page and the formula."""
from __future__ import annotations

import doctest
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from bookpaths import ROOT
from docutils import nodes
from test_book_build import build, tiny_book  # noqa: F401  (the tiny book fixture)

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import typeset_math
from typeset_math import tex_to_mathml


def tags(mathml: str) -> list[str]:
    return [e.tag.rsplit("}", 1)[-1] for e in ET.fromstring(mathml).iter()]


def test_inline_and_display_formulas_become_mathml():
    assert tex_to_mathml(r"\sqrt{n}") == "<math><msqrt><mrow><mi>n</mi></mrow></msqrt></math>"
    display = tex_to_mathml(r"\frac{a}{b} = \sum_{i=1}^{n} x_i", display=True)
    assert display.startswith('<math display="block">')
    assert {"mfrac", "munderover", "msub"} <= set(tags(display))


def test_the_docstring_examples_run():
    results = doctest.testmod(typeset_math)
    assert results.attempted >= 1 and results.failed == 0


def test_limits_of_max_and_min_go_under_them_in_a_display():
    mathml = tex_to_mathml(r"\max_{1 \le j \le k} L_j", display=True)
    assert '<munder><mo movablelimits="true">max</mo>' in mathml


def test_text_keeps_its_outer_spaces():
    # A browser trims a token's outer spaces; no-break spaces stay.
    assert "<mtext>\u00a0if\u00a0</mtext>" in tex_to_mathml(r"0 \text{ if } K")


def test_upright_words_are_one_token():
    assert '<mi mathvariant="normal">peak</mi>' in tex_to_mathml(r"\mathrm{peak}(i)")


def test_a_display_with_line_breaks_is_aligned_rows_as_sphinx_does():
    mathml = tex_to_mathml("a &= b,\\\\\nc &\\approx d.", display=True)
    assert tags(mathml).count("mtr") == 2
    assert 'columnalign="right"' in mathml and 'columnalign="left"' in mathml


def test_named_spaces_become_lengths():
    # MathML Core dropped MathML 3's named spaces; latex2mathml writes \! as one.
    assert 'width="-0.1667em"' in tex_to_mathml(r"a\!b")


@pytest.mark.parametrize("tex, words", [
    (r"\foo{x}", "unknown command \\foo"),
    ("\\begin{aligned}a &= b \\\\ c &= d\\end{aligned}", "malformed"),
    (r"\frac{a}", "needs 2 parts"),
    (r"\boxed{x}", "<menclose> is not MathML Core"),
    (r"x \\ y", "line break"),
    (r"\left( x", "ExtraLeftOrMissingRightError"),
    (r"x^{", "MissingSuperScriptOrSubscriptError"),
])
def test_what_browsers_would_not_draw_is_refused(tex, words):
    with pytest.raises(ValueError) as error:
        tex_to_mathml(tex)
    assert words in str(error.value)


class Writer:
    """What the math visitors use of Sphinx's HTML translator."""

    def __init__(self):
        self.body = []
        self.builder = SimpleNamespace(current_docname="ch99_page")

    def starttag(self, node, tag, suffix="", **attributes):
        return f"<{tag}>"


def math_node(tex: str, node_type=nodes.math):
    node = node_type(tex, tex)
    node.source, node.line = "notebooks/ch99_page.ipynb", 7
    return node


def test_the_writer_puts_mathml_in_the_page_or_stops_naming_page_and_formula():
    # Formulas that appear after reading (the read-time check missed them) still fail.
    writer = Writer()
    with pytest.raises(nodes.SkipNode):
        typeset_math.visit_math(writer, math_node(r"\sqrt{n}"))
    assert writer.body[-1] == "<math><msqrt><mrow><mi>n</mi></mrow></msqrt></math></span>"
    display = math_node("a\n\nb", nodes.math_block)
    display["number"], display["nowrap"] = None, False
    with pytest.raises(nodes.SkipNode):
        typeset_math.visit_displaymath(writer, display)
    assert "".join(writer.body).count('<math display="block">') == 2   # two equations
    with pytest.raises(typeset_math.MathError,
                       match=r"ch99_page.ipynb:7: cannot typeset the formula \$\\foo\$"):
        typeset_math.visit_math(Writer(), math_node(r"\foo"))


# --- Through the real build: a tiny book with the book's configuration ----------------

@pytest.fixture
def tiny(request):
    """tests/test_book_build.py's tiny book: the book's configuration and extensions."""
    return request.getfixturevalue("tiny_book")


def md_book(book, text: str):
    """The tiny book with one Markdown page instead of its notebook."""
    (book / "page.ipynb").unlink()
    (book / "page.md").write_text(text)
    return book


@pytest.mark.book
def test_the_built_page_has_mathml_numbers_and_no_mathjax(tiny):
    book = md_book(tiny, "(page)=\n# Page\n\nInline $\\sqrt{n}$ and\n\n"
                              "$$\nM = 2\\sqrt{n}\\,a\n$$ (eq-peak)\n\nas {eq}`eq-peak` says.\n")
    result = build(book, "--stored-outputs")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = (book / "_build" / "html" / "page.html").read_text()
    assert html.count("<math") == 2 and "<msqrt>" in html
    assert '<span class="eqno">(1)' in html and 'href="#equation-eq-peak"' in html
    built = book / "_build" / "html"
    assert not (built / "_static" / "mathjax").exists()
    assert "mathjax" not in "".join(p.read_text() for p in built.rglob("*.html")).replace(
        "mathjax_ignore", "").replace("mathjax_process", "").lower()


@pytest.mark.book
def test_a_formula_the_converter_cannot_handle_fails_the_build(tiny):
    book = md_book(tiny, "(page)=\n# Page\n\nFine $x$, broken $\\unknowncmd{n}$ and\n\n"
                              "$$\n\\begin{aligned}a &= b\\\\ c &= d\\end{aligned}\n$$\n")
    result = build(book, "--stored-outputs")
    output = result.stdout + result.stderr
    assert result.returncode != 0, "a formula latex2mathml cannot handle was built"
    assert "2 formula(s) cannot be typeset" in output, output[-3000:]
    assert "page:4: $\\unknowncmd{n}$: unknown command \\unknowncmd" in output, output[-3000:]
    assert "page:6: $\\begin{aligned}a &= b" in output, output[-3000:]
