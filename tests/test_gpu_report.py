"""scripts/gpu_report.py and scripts/gpu_check.sh: pairing, tolerance, report, refusal."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest

from bookpaths import ROOT, cell_source, load_module, load_notebook

gpu_report = load_module(ROOT / "scripts" / "gpu_report.py")


def rec(key, device="cuda", **figures):
    return {"key": key, "device": device, "figures": figures}


def test_pairs_by_convention_and_by_rule():
    records = [
        rec("ch13_full_peak", cpu_peak=1_000_000, cuda_peak=1_050_000),
        rec("ch00_kept_plain", cpu_saved=229_376, cuda_held=229_888, cuda_step_peak=5_000_000),
        rec("ch11_layer_sdpa", cpu_saved=10, gpu_terms=2_000_000, cuda_held=1_700_000),
        rec("ch14_peak", cpu_peak=500, cuda_peak=None),           # not measured: unpaired
        rec("ch13_cpu_only", device="cpu", cpu_peak=7, cuda_peak=None),
    ]
    pairs, unpaired = gpu_report.pair_figures(records)
    got = {(p.key, p.reference_name, p.cuda_name): p.ok for p in pairs}
    assert got == {
        ("ch13_full_peak", "cpu_peak", "cuda_peak"): True,            # +5 %
        ("ch00_kept_plain", "cpu_saved", "cuda_held"): True,          # +512 B, under 64 KiB
        ("ch11_layer_sdpa", "gpu_terms", "cuda_held"): False,         # -15 %
    }
    assert ("ch00_kept_plain", "cuda_step_peak", 5_000_000) in unpaired
    assert ("ch11_layer_sdpa", "cpu_saved", 10) in unpaired
    assert ("ch14_peak", "cuda_peak", None) in unpaired
    assert not any(k == "ch13_cpu_only" for k, *_ in unpaired)


def test_tolerance_held_pairs_tight_peaks_loose():
    big = gpu_report.Pair("k", "cpu_x", 10_000_000, "cuda_x", 11_000_000)
    assert big.ok and not gpu_report.Pair("k", "cpu_x", 10_000_000, "cuda_x", 11_000_001).ok
    small = gpu_report.Pair("k", "cpu_x", 1_000, "cuda_x", 1_000 + 64 * 1024)
    assert small.ok and not gpu_report.Pair("k", "cpu_x", 1_000, "cuda_x", 1_001 + 64 * 1024).ok
    # Held after the forward pass: the allocator's rounding passes, a missing 8 KiB
    # tensor (ch10's block input) in a 96 KiB figure does not, nor in a 320 KiB one.
    for name in ("cuda_held", "cuda_after_forward"):
        assert gpu_report.Pair("ch10", "cpu_saved", 96 * 1024, name, 96 * 1024 + 512).ok
        assert not gpu_report.Pair("ch10", "cpu_saved", 96 * 1024, name, 88 * 1024).ok
        assert not gpu_report.Pair("ch10", "cpu_saved", 320 * 1024, name, 312 * 1024).ok
        assert gpu_report.Pair("k", "cpu_saved", 10_000_000, name, 10_100_000).ok
        assert not gpu_report.Pair("k", "cpu_saved", 10_000_000, name, 10_100_001).ok


def test_ch09_pairs_compare_like_with_like():
    # Held after forward against the saved-tensor meter (by rule); the step peak against
    # the CPU allocator's peak of the same window (weights excluded on both sides).
    pairs, unpaired = gpu_report.pair_figures([rec(
        "ch09_step_plain", cpu_saved=229_376, cpu_step_peak=134_328_356,
        cuda_after_forward=229_888, cuda_step_peak=134_300_000)])
    got = {(p.reference_name, p.cuda_name) for p in pairs}
    assert got == {("cpu_saved", "cuda_after_forward"), ("cpu_step_peak", "cuda_step_peak")}
    assert all(p.ok for p in pairs) and not unpaired


def test_compare_writes_report_and_fails_on_a_disagreement(tmp_path):
    meas = tmp_path / "m.jsonl"
    meas.write_text("\n".join(json.dumps(r) for r in [
        rec("ch12_a", cpu_peak=4_000_000, cuda_peak=4_100_000),
        rec("ch12_b", cpu_peak=4_000_000, cuda_peak=6_000_000)]) + "\n")
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps({"ch12_x.ipynb": {"seconds": 12.5, "error": None}}))
    report = tmp_path / "out" / "gpu_check.md"
    status = gpu_report.main(["compare", str(meas), str(runs), str(report), "--gpu", "Test GPU 80GB"])
    text = report.read_text()
    assert status == 1
    assert "- GPU: Test GPU 80GB" in text and "UTC" in text
    assert "- torch " in text and "held after the forward pass" in text
    assert "1 of 2 figure pairs agree" in text
    assert "| ch12_b | cpu_peak | 4,000,000 | cuda_peak | 6,000,000 | +2,000,000 (+50.0%) | 400,000 | **no** |" in text
    meas.write_text(json.dumps(rec("ch12_a", cpu_peak=4_000_000, cuda_peak=4_100_000)) + "\n")
    assert gpu_report.main(["compare", str(meas), str(runs), str(report), "--gpu", "G"]) == 0


def test_bad_measurement_line_is_named(tmp_path):
    meas = tmp_path / "m.jsonl"
    meas.write_text('{"key": "x"}\n')
    with pytest.raises(ValueError, match="m.jsonl:1"):
        gpu_report.load_records(meas)


@pytest.mark.slow
def test_execute_collects_what_notebooks_record(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from bookkit.torchmem import record\nrecord('ch99_demo', cpu_peak=123, cuda_peak=None)"),
        nbformat.v4.new_code_cell(
        "import os, sys, bookkit\nprint(sys.executable)\nprint(os.environ['PYTHONPATH'].split(os.pathsep)[0])\n"
        "print(bookkit.__file__)")]
    src = tmp_path / "notebooks" / "ch99_demo.ipynb"          # run in its own folder
    src.parent.mkdir()
    nbformat.write(nb, src)
    monkeypatch.setenv("BOOK_MEASUREMENTS", str(tmp_path / "m.jsonl"))
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.setenv("JUPYTER_PATH", "")
    runs = gpu_report.execute(tmp_path / "out", [str(src)])
    assert runs["ch99_demo.ipynb"]["error"] is None
    assert gpu_report.load_records(tmp_path / "m.jsonl") == [
        {"key": "ch99_demo", "device": "cpu", "figures": {"cpu_peak": 123, "cuda_peak": None}}]
    assert (tmp_path / "out" / "runs.json").is_file()
    # The kernel is this interpreter, and it imports this checkout's bookkit.
    executed = nbformat.read(tmp_path / "out" / "ch99_demo.ipynb", as_version=4)
    exe, path0, bookkit_file = executed.cells[1].outputs[0]["text"].split()
    assert os.path.realpath(exe) == os.path.realpath(sys.executable)
    assert path0 == str(ROOT)
    assert bookkit_file == str(ROOT / "bookkit" / "__init__.py")


def test_setup_installs_only_what_is_missing_and_never_torch(tmp_path):
    import importlib.metadata

    req = tmp_path / "requirements.txt"
    pins = {dist: importlib.metadata.version(dist) for dist, _ in gpu_report.NOTEBOOK_PACKAGES.values()}
    req.write_text("# pins\ntorch==2.13.0+cpu\n" + "".join(f"{d}=={v}\n" for d, v in pins.items()))
    assert gpu_report.missing_packages(req) == []
    assert gpu_report.setup(req, dry_run=True) == []
    # Another version of an exact pin is installed at the pin; a loose one is left alone.
    req.write_text(req.read_text().replace(f"peft=={pins['peft']}", "peft==0.0.1")
                   .replace(f"numpy=={pins['numpy']}", "numpy==1.0.0"))
    assert gpu_report.missing_packages(req) == ["peft==0.0.1"]
    req.write_text("torch==2.13.0+cpu\n")
    with pytest.raises(ValueError, match="no pinned version of numpy"):
        gpu_report.missing_packages(req)
    assert "torch" not in {m for m in gpu_report.NOTEBOOK_PACKAGES}


def test_device_info_without_a_gpu():
    lines = gpu_report.device_info()
    assert lines[0].startswith("torch ")
    if not __import__("torch").cuda.is_available():
        assert lines[-1] == "no CUDA device visible to torch"


def test_gpu_check_covers_every_notebook_with_gpu_cells(tmp_path):
    # the list is found from the code cells (raw JSON escapes the quotes: a text search
    # of the file finds nothing, which once let a chapter with GPU cells go unchecked)
    found = gpu_report.gpu_notebooks()
    assert len(found) >= 10 and all(p.name.startswith("ch") for p in found)
    for nb in (ROOT / "notebooks").glob("ch*.ipynb"):
        code = "".join(cell_source(c) for c in load_notebook(nb)["cells"] if c["cell_type"] == "code")
        assert (nb in found) == ('DEVICE == "cuda"' in code), nb.name
    assert "gpu_report.py notebooks" in (ROOT / "scripts" / "gpu_check.sh").read_text()
    # a notebook whose only mention is in Markdown or an output is not a GPU chapter
    (tmp_path / "notebooks").mkdir()
    for name, cell in [("ch00_a", nbformat.v4.new_code_cell('if DEVICE == "cuda":\n    pass')),
                       ("ch01_b", nbformat.v4.new_markdown_cell('`DEVICE == "cuda"`'))]:
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "notebooks" / f"{name}.ipynb")
    assert [p.name for p in gpu_report.gpu_notebooks(tmp_path)] == ["ch00_a.ipynb"]


def test_gpu_check_refuses_a_python_without_cuda(tmp_path):
    fake = tmp_path / "nvidia-smi"                  # a driver that lists a GPU...
    fake.write_text("#!/bin/sh\necho 'Fake GPU 80GB'\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", PYTHON=sys.executable)
    if __import__("torch").cuda.is_available():
        pytest.skip("this Python has CUDA")
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2                      # ...but a CPU-only torch: refused
    assert "no CUDA-enabled torch" in out.stderr and "CPU-only" in out.stderr


def test_gpu_check_refuses_without_a_gpu(tmp_path):
    # A PATH without nvidia-smi: the script must stop before running anything.
    env = dict(os.environ, PATH=f"{tmp_path}:/usr/bin:/bin")
    if any((p and os.path.exists(os.path.join(p, "nvidia-smi"))) for p in env["PATH"].split(":")):
        pytest.skip("nvidia-smi is installed system-wide here")
    before = (ROOT / "reports" / "gpu_check.md").read_text() if (ROOT / "reports" / "gpu_check.md").exists() else None
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "needs an NVIDIA GPU" in out.stderr and "nvidia-smi not found" in out.stderr
    after = (ROOT / "reports" / "gpu_check.md").read_text() if (ROOT / "reports" / "gpu_check.md").exists() else None
    assert before == after


# -- the calculator row ----------------------------------------------------------------------
def test_calculator_row_pairs_the_estimate_with_the_allocator():
    pytest.importorskip("transformers")
    cases = gpu_report.calculator_cases()
    keys = [key for key, _, _ in cases]
    assert len(keys) == len(set(keys)) == 2 * 2 * 2 * 3 * 3
    key, config, kwargs = cases[0]
    # A fake GPU record, as run_calculator writes it: the allocator's rounding of the
    # loss scalars (+1 KiB) agrees; two LayerNorms without their float32 statistics
    # (2 x 2 x 4 x 512 B) do not.
    figures = gpu_report.calculator_record(key, config, kwargs, cuda_held=None)
    predicted = figures["predicted_held"]
    from bookkit.calculator import estimate_training_memory
    est = estimate_training_memory(config, device="cuda", **kwargs)
    assert predicted == est["activations"] - est["terms"]["token ids (embedding)"]
    records = [rec(key, **{**figures, "cuda_held": predicted + 1024}),
               rec(key + "_x", **{**figures, "cuda_held": predicted - 2 * 2 * 4 * 512}),
               rec(key + "_y", **{**figures, "cuda_held": None})]
    pairs, unpaired = gpu_report.pair_figures(records)
    assert [(p.key, p.reference_name, p.cuda_name, p.ok) for p in pairs] == [
        (key, "predicted_held", "cuda_held", True),
        (key + "_x", "predicted_held", "cuda_held", False)]
    assert (key + "_y", "cuda_held", None) in unpaired
    # Every case's activation tensors are multiples of the allocator's 512-byte block,
    # but for the loss's two float32 scalars: the 4 KiB tolerance is for those alone.
    for key, config, kwargs in cases:
        terms = estimate_training_memory(config, device="cuda", **kwargs)["terms"]
        odd = {name: v for name, v in terms.items() if v % 512}
        assert set(odd) <= {"loss and its total weight"}, (key, odd)


def test_calculator_row_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gpu_report.main(["calculator"]) == 2


def test_gpu_check_runs_the_calculator_row():
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert "gpu_report.py calculator" in script
