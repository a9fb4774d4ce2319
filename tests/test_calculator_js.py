"""The HTML book's calculator (_static/memory_calculator.js) against bookkit.calculator.

Headless Chromium (Debian's, through Playwright, as tests/test_browser.py drives it)
runs the JavaScript on random configurations and on every combination of the switches
(precision, device, recomputation) and the byte counts must equal Python's, to the
byte; then the form of "The memory calculator" is used over http (an ephemeral port) and from
file://, in a page built from the notebook's raw HTML and in the built book.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import random
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from bookpaths import HTML, ROOT, cell_source, chapter, load_notebook
from test_browser import QuietHandler, browser  # noqa: F401  (the Chromium fixture)

pytest.importorskip("transformers")
from bookkit import calculator  # noqa: E402
from bookkit.calculator import ModelSpec, estimate_from_spec, model_spec  # noqa: E402

pytestmark = pytest.mark.book

STATIC = ROOT / "_static"
NOTEBOOK = chapter("memory_calculator")
PAGE = HTML / "notebooks" / f"{NOTEBOOK.stem}.html"
N_RANDOM = 3000
KEYS = ("parameters", "gradients", "optimizer", "activations", "logits", "total", "peak",
        "peak_phase")


@contextlib.contextmanager
def serve(directory: Path):
    """An HTTP server for ``directory`` on an ephemeral port of 127.0.0.1."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def form_html() -> str:
    """The calculator's form, as the chapter's raw-HTML block holds it."""
    for cell in load_notebook(NOTEBOOK)["cells"]:
        match = re.search(r"```\{raw\} html\n(.*?)\n```", cell_source(cell), re.S)
        if match and 'class="memcalc"' in match.group(1):
            return match.group(1)
    raise AssertionError(f"no calculator form in a raw-HTML block of {NOTEBOOK.name}")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A page with the chapter's form and the _static files, outside the book."""
    folder = tmp_path_factory.mktemp("calculator")
    for name in ("memory_calculator.js", "memory_calculator.css"):
        shutil.copy(STATIC / name, folder / name)
    (folder / "index.html").write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        '<link rel="stylesheet" href="memory_calculator.css">'
        '<script src="memory_calculator.js"></script></head>'
        f"<body>{form_html()}</body></html>")
    return folder


# -- the formula: JavaScript equals Python ------------------------------------------------
def random_case(rng: random.Random):
    """A random ModelSpec (valid or not, as a dict) and step options, over wide ranges."""
    model = rng.choice(["gpt2", "llama"])
    heads = rng.choice([1, 2, 3, 4, 8, 12, 16, 25, 32, 64, 128])
    if model == "gpt2":
        head_dim = rng.choice([1, 16, 64, 80, 128])
        kv, hidden = heads, heads * head_dim
    else:
        kv = rng.choice([k for k in range(1, heads + 1) if heads % k == 0])
        head_dim = rng.choice([2, 8, 64, 128, 256, 320])
        hidden = rng.choice([heads * head_dim, 2 * rng.randint(1, 8192)])
    spec = dict(model=model, n_layers=rng.randint(1, 128), hidden=hidden, n_heads=heads,
                n_kv_heads=kv, head_dim=head_dim, intermediate=rng.randint(1, 65536),
                vocab=rng.randint(1, 262144), max_positions=rng.randint(1, 32768) if model == "gpt2" else 0,
                tie_embeddings=rng.random() < 0.5,
                attn_implementation=rng.choice(["eager", "sdpa"]),
                attention_dropout=rng.choice([0.0, 0.0, 0.1]),
                hidden_dropout=rng.choice([0.0, 0.1]) if model == "gpt2" else 0.0,
                embedding_dropout=rng.choice([0.0, 0.1]) if model == "gpt2" else 0.0,
                activation=rng.choice(sorted(calculator.ACTIVATIONS)),
                attention_bias=rng.random() < 0.5, mlp_bias=rng.random() < 0.5)
    if rng.random() < 0.08:   # now and then an invalid one: both sides must refuse it
        spec[rng.choice(["n_heads", "n_kv_heads", "hidden", "attention_dropout", "activation"])] = \
            rng.choice([0, 3, 7, 1.5, "gelu_fast"])
    opts = dict(batch_size=rng.choice([1, 1, 2, 3, 8, 64]), seq_len=rng.choice([1, 7, 128, 1024, 4096, 32768]),
                precision=rng.choice(["fp32", "bf16", "bf16-autocast"]),
                device=rng.choice(["cpu", "cuda"]), optimizer=rng.choice(["adamw", "sgd"]),
                recompute=rng.choice(["none", "full", "selective"]))
    if model == "gpt2" and rng.random() < 0.9:
        spec["max_positions"] = max(spec["max_positions"], opts["seq_len"])
    return spec, opts


def python_side(spec: dict, opts: dict):
    try:
        est = estimate_from_spec(ModelSpec(**spec), **opts)
    except (ValueError, TypeError):
        return None
    out = {k: str(est[k]) for k in KEYS}
    out["terms"] = [[name, str(value)] for name, value in est["terms"].items()]
    return out


JS_ESTIMATES = """cases => cases.map(c => {
    try { return MemoryCalculator.estimateStrings(c.spec, c.opts); }
    catch (err) { return null; }
})"""


def test_javascript_equals_python_on_random_configurations(browser, standalone):  # noqa: F811
    rng = random.Random(18)
    cases = [random_case(rng) for _ in range(N_RANDOM)]
    # The published configurations, with every combination of the switches, as read from
    # transformers' configs (and GPT-2 XL with eager attention: its dropout terms).
    specs = [model_spec(make()).as_dict() for make in calculator.PRESETS.values()]
    specs.append(dict(specs[3], attn_implementation="eager"))
    for spec in specs:
        for precision in calculator.PRECISIONS:
            for device in calculator.DEVICES:
                for recompute in calculator.RECOMPUTE:
                    cases.append((spec, dict(batch_size=4, seq_len=1024, precision=precision,
                                             device=device, optimizer="adamw",
                                             recompute=recompute)))
    # And one beyond 2**53 bytes, where JavaScript's Numbers would round (BigInt does not).
    huge = dict(model_spec(calculator.PRESETS["Llama 2 7B"]()).as_dict(), n_layers=128,
                attn_implementation="eager", attention_dropout=0.1)
    cases.append((huge, dict(batch_size=256, seq_len=32768, precision="fp32", optimizer="adamw",
                             recompute="none")))
    page = browser.new_page()
    with serve(standalone) as url:
        page.goto(f"{url}/index.html")
        got = page.evaluate(JS_ESTIMATES, [{"spec": s, "opts": o} for s, o in cases])
    page.close()
    expected = [python_side(s, o) for s, o in cases]
    mismatches = [(s, o, e, g) for (s, o), e, g in zip(cases, expected, got) if e != g]
    n_valid = sum(e is not None for e in expected)
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ; first: {mismatches[0]}"
    assert n_valid >= 100 and n_valid < len(cases)   # both valid and invalid cases were compared
    assert int(expected[-1]["total"]) > 2 ** 53


def test_javascript_presets_are_the_python_presets(browser, standalone):  # noqa: F811
    page = browser.new_page()
    page.goto(standalone.joinpath("index.html").as_uri())
    presets = page.evaluate("() => MemoryCalculator.PRESETS")
    page.close()
    assert presets == {name: model_spec(make()).as_dict() for name, make in calculator.PRESETS.items()}


# -- the form ----------------------------------------------------------------------------
def table_value(page, key: str) -> int:
    # The term table sits in a closed dropdown: read its text, rendered or not.
    text = page.locator(f'.memcalc tr[data-key="{key}"] td').nth(1).text_content()
    return int(text.replace(",", ""))


def python_estimate(preset: str, **opts) -> dict:
    spec = model_spec(calculator.PRESETS[preset]())
    return estimate_from_spec(spec, **opts)


def fits_text(estimate: dict, device: str) -> str:
    return " · ".join(f"{g} GB {'✓' if calculator.fits(estimate, g, device) else '✗'}"
                      for g in (24, 40, 80))


def check_form(page):
    """Use the form as a reader would and compare every figure with Python's."""
    page.wait_for_selector('.memcalc[data-ready="true"]', timeout=20_000)
    # The defaults: the common GPU recipe, the Trainer's bf16=True on CUDA.
    assert page.locator('.memcalc select[name="precision"]').input_value() == "bf16-autocast"
    assert page.locator('.memcalc select[name="device"]').input_value() == "cuda"
    default = dict(batch_size=1, seq_len=1024, precision="bf16-autocast", device="cuda",
                   optimizer="adamw")
    expected = python_estimate("Llama 3.2 1B", recompute="none", **default)
    for key in KEYS[:6]:  # the term table's rows
        assert table_value(page, key) == expected[key], key
    assert page.locator(".memcalc tr.memcalc-term").count() == len(expected["terms"])
    # The payoff first: the total and the "fits on" line, then the bars, then the terms
    # in a closed dropdown.
    headline = page.locator('.memcalc [data-key="headline-total"]')
    assert int(headline.get_attribute("data-bytes")) == expected["total"]
    fits = page.locator('.memcalc [data-key="fits"]').inner_text()
    assert fits == "Fits on: " + fits_text(expected, "cuda")
    order = page.evaluate("""() => {
        const r = document.querySelector('.memcalc');
        const y = s => r.querySelector(s).getBoundingClientRect().top;
        return [y('.memcalc-summary'), y('svg.memcalc-chart'), y('.memcalc-details')];
    }""")
    assert order == sorted(order)
    assert page.locator(".memcalc details.memcalc-details").get_attribute("open") is None
    # The chart: one stacked bar per recomputation mode, five segments each.
    assert page.locator(".memcalc svg rect[data-mode]").count() == 3 * 5
    page.select_option('.memcalc select[name="recompute"]', "full")
    assert table_value(page, "total") == python_estimate("Llama 3.2 1B", recompute="full",
                                                         **default)["total"]
    # Every switch combination, through the form.
    for precision in calculator.PRECISIONS:
        for device in calculator.DEVICES:
            page.select_option('.memcalc select[name="precision"]', precision)
            page.select_option('.memcalc select[name="device"]', device)
            opts = dict(default, precision=precision, device=device)
            assert table_value(page, "total") == python_estimate(
                "Llama 3.2 1B", recompute="full", **opts)["total"], (precision, device)
    page.select_option('.memcalc select[name="precision"]', "bf16")
    page.select_option('.memcalc select[name="device"]', "cpu")
    bf16 = dict(default, precision="bf16", device="cpu")
    page.select_option('.memcalc select[name="preset"]', "Llama 3 8B")
    page.fill('.memcalc input[name="seq_len"]', "8192")
    expected = python_estimate("Llama 3 8B", recompute="full", **{**bf16, "seq_len": 8192})
    assert table_value(page, "activations") == expected["activations"]
    assert table_value(page, "total") == expected["total"]
    assert page.locator('.memcalc select[name="preset"]').input_value() == "Llama 3 8B"
    # Editing the model makes the preset "custom"; a step option does not.
    page.fill('.memcalc input[name="n_layers"]', "16")
    assert page.locator('.memcalc select[name="preset"]').input_value() == ""
    # Bad input gets a message, not a wrong number.
    page.fill('.memcalc input[name="n_kv_heads"]', "7")
    error = page.locator(".memcalc .memcalc-error")
    assert error.is_visible() and "n_kv_heads" in error.inner_text()
    assert not page.locator(".memcalc .memcalc-summary").is_visible()
    # GPT-2's head width is hidden / heads: an indivisible pair is named, not divided.
    page.select_option('.memcalc select[name="preset"]', "GPT-2 XL (1.5B)")
    page.fill('.memcalc input[name="n_heads"]', "7")
    assert error.is_visible() and "1600 is not divisible by 7" in error.inner_text()


def hosts_of(requests) -> set:
    return {urlparse(u).hostname for u in requests if u.startswith(("http:", "https:"))}


def use_form_over_http_and_from_file(browser, folder: Path, page_path: str):  # noqa: F811
    """check_form on folder/page_path served over http, then opened as a file; no page
    may request anything from another host (from file://, nothing at all)."""
    for use_http in (True, False):
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        if use_http:
            with serve(folder) as url:
                page.goto(f"{url}/{page_path}", wait_until="networkidle")
                check_form(page)
        else:
            page.goto((folder / page_path).as_uri())
            check_form(page)
        page.close()
        assert hosts_of(requests) == ({"127.0.0.1"} if use_http else set())


def test_form_works_over_http_and_from_file(browser, standalone):  # noqa: F811
    use_form_over_http_and_from_file(browser, standalone, "index.html")


def test_built_chapter_runs_the_calculator_offline(browser):  # noqa: F811
    if not PAGE.is_file():
        pytest.fail(f"{PAGE} is missing: run `make book` first (make test does)")
    html = PAGE.read_text()
    assert "_static/memory_calculator.js" in html and "_static/memory_calculator.css" in html
    use_form_over_http_and_from_file(browser, HTML, f"notebooks/{PAGE.name}")
