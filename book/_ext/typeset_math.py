"""Typeset the book's math at build time, as MathML, instead of in the reader's browser.

Every inline (``$...$``) and display (``$$...$$``, amsmath) math node is converted to
MathML Core by ``latex2mathml`` (pure Python, pinned in requirements.txt) when the page
is written, and browsers draw it natively (Chromium, Firefox and Safari). No page loads
MathJax (0.76 MB a page before) and nothing of it is copied into ``_static``.

A formula the converter cannot handle fails the build, naming the page, the line and
the formula: latex2mathml passes an unknown command through as the text ``\\foo``,
emits ``&`` outside a table as bare text and writes elements browsers do not draw
(``menclose``), so its output is checked here, not trusted (see ``tex_to_mathml``).

Display math follows Sphinx's own conventions (``sphinx.ext.mathjax``): a display with
``\\\\`` is a ``split`` (rows aligned at ``&``), blank lines separate equations, and a
labelled equation gets Sphinx's number and permalink (``<span class="eqno">``).
``_static/reader.css`` carries the few rules browsers need for aligned rows and for
displays wider than a phone's column (they scroll inside their own box).
"""
from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET

from docutils import nodes
from docutils.utils import get_source_line
from sphinx.errors import SphinxError
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)

MATHML_NS = "http://www.w3.org/1998/Math/MathML"
# The elements of MathML Core (https://www.w3.org/TR/mathml-core/): what browsers draw.
CORE_ELEMENTS = frozenset(
    "math mi mn mo ms mspace mtext mrow mfrac msqrt mroot mstyle merror mpadded mphantom "
    "msub msup msubsup munder mover munderover mmultiscripts mprescripts none mtable mtr "
    "mtd semantics annotation annotation-xml".split())
# How many children a layout element must have (latex2mathml writes ``\frac{a}`` as
# an <mfrac> with one child, which a browser draws as nothing).
ARITY = {"mfrac": 2, "mroot": 2, "msub": 2, "msup": 2, "msubsup": 3, "munder": 2,
         "mover": 2, "munderover": 3}
# MathML 3's named spaces (latex2mathml writes ``\!`` as one), which MathML Core dropped.
NAMED_SPACES = {name: f"{sign}{n / 18:.4f}em" for n, base in enumerate(
    ["veryverythin", "verythin", "thin", "medium", "thick", "verythick", "veryverythick"],
    start=1) for sign, name in (("", f"{base}mathspace"), ("-", f"negative{base}mathspace"))}
# Operators whose limits go under them in a display (``\max_{i}``), as in LaTeX.
LIMIT_OPERATORS = frozenset(
    "max min lim sup inf limsup liminf argmax argmin det gcd Pr".split())
# amsmath environments that number their lines; Sphinx's MathJax set-up numbered none of
# them (MathJax's default ``tags: 'none'``), and latex2mathml would print "(1)" per block.
NUMBERED_ENVIRONMENT = re.compile(r"\\(begin|end)\{(equation|align|gather|multline|flalign)\}")


class MathError(SphinxError):
    """A formula that cannot be typeset as MathML Core."""

    category = "Math error"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _check_and_fix(element: ET.Element) -> None:
    """Raise ValueError for what browsers would not draw as written; fix the rest."""
    tag = _local(element.tag)
    if tag not in CORE_ELEMENTS:
        raise ValueError(f"<{tag}> is not MathML Core: browsers would not draw it")
    if tag in ARITY and len(element) != ARITY[tag]:
        raise ValueError(f"<{tag}> needs {ARITY[tag]} parts, got {len(element)} "
                         "(a missing {argument}?)")
    text = (element.text or "").strip()
    if tag in ("mi", "mo", "mn", "mtext") and text.startswith("\\"):
        raise ValueError(f"unknown command {text}")
    if tag == "mspace" and element.get("linebreak"):
        raise ValueError("a line break (\\\\) outside an aligned display; put the rows "
                         "in a $$ display (rows split at \\\\, aligned at &)")
    if tag == "mtext" and element.text:
        # Browsers trim a token's outer spaces: \text{ if } would lose its gaps.
        core = element.text.strip(" ")
        lead = len(element.text) - len(element.text.lstrip(" ")) if core else 0
        trail = len(element.text) - len(element.text.rstrip(" "))
        element.text = "\u00a0" * lead + core + "\u00a0" * trail
    variant = element.get("mathvariant")
    if variant not in (None, "normal"):
        raise ValueError(f'mathvariant="{variant}" is not drawn by Chromium; use a '
                         "Unicode letter (\\mathbb, \\mathbf) or \\mathrm")
    for name in ("width", "lspace", "rspace", "height", "depth"):
        if element.get(name) in NAMED_SPACES:
            element.set(name, NAMED_SPACES[element.get(name)])
    # \max_{i} in a display: the limit under the operator (movablelimits puts it back as
    # a subscript in inline math, as LaTeX does).
    if tag in ("msub", "msup", "msubsup") and len(element):
        base = element[0]
        if _local(base.tag) == "mo" and (base.text or "").strip() in LIMIT_OPERATORS:
            element.tag = element.tag.replace(
                tag, {"msub": "munder", "msup": "mover", "msubsup": "munderover"}[tag])
            base.set("movablelimits", "true")
    for child in element:
        _check_and_fix(child)
    _merge_upright_letters(element)


def _merge_upright_letters(element: ET.Element) -> None:
    """``\\mathrm{peak}`` comes as one <mi mathvariant="normal"> per letter; one <mi>
    (upright, as every multi-letter <mi> is) reads and copies as the word."""
    children = list(element)
    i = 0
    while i < len(children):
        run = [children[i]]
        while (i + len(run) < len(children)
               and all(_upright_letter(c) for c in (run[0], children[i + len(run)]))
               and not (run[-1].tail or "").strip()):
            run.append(children[i + len(run)])
        if len(run) > 1:
            run[0].text = "".join(c.text for c in run)
            run[0].tail = run[-1].tail
            for extra in run[1:]:
                element.remove(extra)
        i += len(run)


def _upright_letter(e: ET.Element) -> bool:
    return (_local(e.tag) == "mi" and e.get("mathvariant") == "normal" and len(e) == 0
            and len(e.text or "") == 1 and len(e.attrib) == 1)


@functools.cache
def tex_to_mathml(tex: str, display: bool = False) -> str:
    """One formula's LaTeX as a MathML Core ``<math>`` element, checked.

    Args:
        tex: the formula without delimiters (what ``$...$`` or ``$$...$$`` holds).
        display: a display (``<math display="block">``) rather than inline math.

    Returns:
        The ``<math>`` element as HTML text.

    Raises:
        ValueError: naming what the converter could not typeset.

    Example:
        >>> import sys; sys.path.insert(0, "book/_ext")
        >>> from typeset_math import tex_to_mathml
        >>> tex_to_mathml(r"\\sqrt{n}")
        '<math><msqrt><mrow><mi>n</mi></mrow></msqrt></math>'
    """
    from latex2mathml.converter import convert

    source = NUMBERED_ENVIRONMENT.sub(r"\\\1{\2*}", tex.strip())
    if display and "\\\\" in source and "\\begin{" not in source:
        source = "\\begin{split}" + source + "\\end{split}"   # as Sphinx's MathJax does
    try:
        converted = convert(source, display="block" if display else "inline")
    except Exception as error:  # noqa: BLE001  (latex2mathml's errors share no base)
        raise ValueError(f"{type(error).__name__} {error}".strip()) from None
    try:
        root = ET.fromstring(converted)
    except ET.ParseError as error:
        why = (" (an & outside an environment latex2mathml knows: write aligned rows "
               "as a $$ display without \\begin{aligned})") if "&" in source else ""
        raise ValueError(f"the converter wrote malformed MathML: {error}{why}") from None
    _check_and_fix(root)
    # The wrapping <mrow> latex2mathml puts around everything changes nothing.
    if len(root) == 1 and _local(root[0].tag) == "mrow" and not root[0].attrib:
        inner = root[0]
        root.remove(inner)
        root.extend(list(inner))
    root.attrib.pop("display", None)
    if display:
        root.set("display", "block")
    ET.register_namespace("", MATHML_NS)
    text = ET.tostring(root, encoding="unicode", short_empty_elements=True)
    # In HTML the <math> element is MathML without a namespace declaration.
    return text.replace(f' xmlns="{MATHML_NS}"', "", 1)


def _quoted(tex: str) -> str:
    """A formula on one line, between dollars, as its author wrote it."""
    return "$" + " ".join(tex.split()) + "$"


def _where(self, node) -> str:
    source, line = get_source_line(node)
    return f"{source or self.builder.current_docname}:{line or '?'}"


def _mathml(self, node, display: bool) -> str:
    try:
        return tex_to_mathml(node.astext(), display)
    except ValueError as error:
        raise MathError(f"{_where(self, node)}: cannot typeset the formula "
                        f"{_quoted(node.astext())} as MathML: {error}") from None


def visit_math(self, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(_mathml(self, node, display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node["number"]:
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    if node.get("nowrap"):
        parts = [node.astext()]       # an amsmath environment, written whole
    else:
        parts = [p for p in node.astext().split("\n\n") if p.strip()]
    for part in parts:
        self.body.append(_mathml_part(self, node, part))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def _mathml_part(self, node, part: str) -> str:
    try:
        return tex_to_mathml(part, display=True)
    except ValueError as error:
        raise MathError(f"{_where(self, node)}: cannot typeset the formula "
                        f"{_quoted(part)} as MathML: {error}") from None


def check_every_formula(app, doctree) -> None:
    """Every formula of a page, converted as it is read: all failures named at once
    (with the page and line), then the build stops before writing anything."""
    failures = []
    for node in doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
        display = isinstance(node, nodes.math_block)
        parts = ([node.astext()] if not display or node.get("nowrap") else
                 [p for p in node.astext().split("\n\n") if p.strip()])
        for part in parts:
            try:
                tex_to_mathml(part, display)
            except ValueError as error:
                logger.error("cannot typeset the formula %s as MathML: %s",
                             _quoted(part), error, location=node)
                line = get_source_line(node)[1] or "?"
                failures.append(f"{app.env.docname}:{line}: {_quoted(part)}: {error}")
    if failures:
        app.env.mathml_failures = getattr(app.env, "mathml_failures", {})
        app.env.mathml_failures[app.env.docname] = failures


def _purge(app, env, docname):
    getattr(env, "mathml_failures", {}).pop(docname, None)


def _merge(app, env, docnames, other):
    env.mathml_failures = getattr(env, "mathml_failures", {})
    env.mathml_failures.update(getattr(other, "mathml_failures", {}))


def fail_on_untypeset_math(app, env):
    failures = [f for fs in getattr(env, "mathml_failures", {}).values() for f in fs]
    if failures:
        raise MathError(f"{len(failures)} formula(s) cannot be typeset as MathML "
                        "(rewrite them with what latex2mathml knows):\n  " +
                        "\n  ".join(failures))


def _select_renderer(app, config):
    try:
        import latex2mathml  # noqa: F401
    except ImportError:
        raise MathError("latex2mathml is not installed, and the book's math is typeset "
                        "with it: pip install -r requirements.txt") from None
    config.html_math_renderer = "mathml"


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    app.connect("config-inited", _select_renderer, priority=900)
    app.connect("doctree-read", check_every_formula)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-updated", fail_on_untypeset_math)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
