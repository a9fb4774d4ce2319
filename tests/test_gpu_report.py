"""scripts/gpu_report.py and scripts/gpu_check.sh: pairing, tolerance, report, refusal."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import nbformat
import pytest

from bookpaths import ROOT

spec = importlib.util.spec_from_file_location("gpu_report", ROOT / "scripts" / "gpu_report.py")
gpu_report = importlib.util.module_from_spec(spec)
sys.modules["gpu_report"] = gpu_report          # dataclasses look their module up by name
spec.loader.exec_module(gpu_report)


def rec(key, device="cuda", **figures):
    return {"key": key, "device": device, "figures": figures}


def test_pairs_by_convention_and_by_rule():
    records = [
        rec("ch11_full_peak", cpu_peak=1_000_000, cuda_peak=1_050_000),
        rec("ch00_kept_plain", cpu_saved=229_376, cuda_held=229_888, cuda_step_peak=5_000_000),
        rec("ch09_layer_sdpa", cpu_saved=10, gpu_terms=2_000_000, cuda_held=1_700_000),
        rec("ch12_peak", cpu_peak=500, cuda_peak=None),           # not measured: unpaired
        rec("ch11_cpu_only", device="cpu", cpu_peak=7, cuda_peak=None),
    ]
    pairs, unpaired = gpu_report.pair_figures(records)
    got = {(p.key, p.reference_name, p.cuda_name): p.ok for p in pairs}
    assert got == {
        ("ch11_full_peak", "cpu_peak", "cuda_peak"): True,            # +5 %
        ("ch00_kept_plain", "cpu_saved", "cuda_held"): True,          # +512 B, under 64 KiB
        ("ch09_layer_sdpa", "gpu_terms", "cuda_held"): False,         # -15 %
    }
    assert ("ch00_kept_plain", "cuda_step_peak", 5_000_000) in unpaired
    assert ("ch09_layer_sdpa", "cpu_saved", 10) in unpaired
    assert ("ch12_peak", "cuda_peak", None) in unpaired
    assert not any(k == "ch11_cpu_only" for k, *_ in unpaired)


def test_tolerance_is_ten_percent_or_64_kib():
    big = gpu_report.Pair("k", "cpu_x", 10_000_000, "cuda_x", 11_000_000)
    assert big.ok and not gpu_report.Pair("k", "cpu_x", 10_000_000, "cuda_x", 11_000_001).ok
    small = gpu_report.Pair("k", "cpu_x", 1_000, "cuda_x", 1_000 + 64 * 1024)
    assert small.ok and not gpu_report.Pair("k", "cpu_x", 1_000, "cuda_x", 1_001 + 64 * 1024).ok


def test_compare_writes_report_and_fails_on_a_disagreement(tmp_path):
    meas = tmp_path / "m.jsonl"
    meas.write_text("\n".join(json.dumps(r) for r in [
        rec("ch10_a", cpu_peak=4_000_000, cuda_peak=4_100_000),
        rec("ch10_b", cpu_peak=4_000_000, cuda_peak=6_000_000)]) + "\n")
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps({"ch10_x.ipynb": {"seconds": 12.5, "error": None}}))
    report = tmp_path / "out" / "gpu_check.md"
    status = gpu_report.main(["compare", str(meas), str(runs), str(report), "--gpu", "Test GPU 80GB"])
    text = report.read_text()
    assert status == 1
    assert "- GPU: Test GPU 80GB" in text and "UTC" in text
    assert "1 of 2 figure pairs agree" in text
    assert "| ch10_b | cpu_peak | 4,000,000 | cuda_peak | 6,000,000 | +2,000,000 (+50.0%) | **no** |" in text
    meas.write_text(json.dumps(rec("ch10_a", cpu_peak=4_000_000, cuda_peak=4_100_000)) + "\n")
    assert gpu_report.main(["compare", str(meas), str(runs), str(report), "--gpu", "G"]) == 0


def test_bad_measurement_line_is_named(tmp_path):
    meas = tmp_path / "m.jsonl"
    meas.write_text('{"key": "x"}\n')
    with pytest.raises(ValueError, match="m.jsonl:1"):
        gpu_report.load_records(meas)


def test_execute_collects_what_notebooks_record(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from bookkit.torchmem import record\nrecord('ch99_demo', cpu_peak=123, cuda_peak=None)")]
    src = tmp_path / "ch99_demo.ipynb"
    nbformat.write(nb, src)
    monkeypatch.setenv("BOOK_MEASUREMENTS", str(tmp_path / "m.jsonl"))
    runs = gpu_report.execute(tmp_path / "out", [str(src)])
    assert runs["ch99_demo.ipynb"]["error"] is None
    assert gpu_report.load_records(tmp_path / "m.jsonl") == [
        {"key": "ch99_demo", "device": "cpu", "figures": {"cpu_peak": 123, "cuda_peak": None}}]
    assert (tmp_path / "out" / "runs.json").is_file()


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
