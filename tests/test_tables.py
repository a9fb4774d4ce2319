"""bookkit.tables: HTML tables with a text fallback."""
import pytest

from bookkit.tables import Table, show_table


def test_html_and_text_forms():
    t = Table(["plan", "peak", "FLOPs"], [["store all", "1.0 MiB", "1,024"],
                                          ["sqrt(n) <x>", "0.5 MiB", "2,048"]])
    html = t._repr_html_()
    assert html.count("<tr>") == 3 and "&lt;x&gt;" in html  # escaped
    assert 'text-align:right">1,024' in html and 'text-align:left">store all' in html
    text = repr(t).splitlines()
    assert text[0].split() == ["plan", "peak", "FLOPs"] and text[2].startswith("sqrt(n) <x>")
    assert text[1].endswith("1,024")  # numeric columns right-aligned


def test_caption_and_alignment():
    t = Table(["a", "b"], [["1", "x"]], caption="What a step keeps", align="cl")
    assert "<caption>What a step keeps</caption>" in t._repr_html_()
    assert repr(t).splitlines()[0] == "What a step keeps"


@pytest.mark.parametrize("rows, align, message", [
    ([["1"]], None, "row 0 has 1 cells, the header has 2"),
    ([["1", "2"]], "lx", "align needs one of"),
])
def test_bad_input_is_named(rows, align, message):
    with pytest.raises(ValueError, match=message):
        Table(["a", "b"], rows, align=align)


def test_show_table_returns_nothing(capsys):
    assert show_table(["a"], [["1"]]) is None


def test_wide_tables_fall_back_to_one_block_per_row():
    t = Table(["a long column title " * 3, "b"], [["x" * 40, "1"], ["y", "2"]])
    text = repr(t).splitlines()
    assert max(len(l) for l in text) <= 88
    assert text[0].startswith("a long column title") and "xxxx" in text[0] + text[1]


def test_long_caption_wraps_in_the_text_form():
    t = Table(["a"], [["1"]], caption="word " * 30)
    assert all(len(l) <= 88 for l in repr(t).splitlines())
    assert "<caption>" + "word " * 30 + "</caption>" in t._repr_html_()  # whole in HTML
