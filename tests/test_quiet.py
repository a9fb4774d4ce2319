"""Importing transformers (which imports DeepSpeed and bitsandbytes when they are
installed) prints nothing machine-dependent once bookkit is imported."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("transformers")

SCRIPT = """
import bookkit
import transformers
from transformers import Trainer, TrainingArguments
import importlib.util
for name in ("deepspeed", "bitsandbytes"):
    if importlib.util.find_spec(name) is not None:
        __import__(name)
print("imported")
"""


def test_optional_libraries_import_quietly():
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "DS_ACCELERATOR"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300, env=env_free)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "imported" in proc.stdout
    assert "Setting accelerator to CPU" not in out
    assert "gemm_4bit_forward" not in out
