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
import os
print("imported; DS_ACCELERATOR =", os.environ.get("DS_ACCELERATOR"))
"""


@pytest.mark.slow
def test_optional_libraries_import_quietly():
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "DS_ACCELERATOR"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300, env=env_free)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "imported" in proc.stdout
    # bookkit chooses no accelerator for DeepSpeed: it only drops the notice.
    assert "DS_ACCELERATOR = None" in proc.stdout
    assert "Setting accelerator to CPU" not in out
    assert "gemm_4bit_forward" not in out


def test_the_filter_drops_only_the_cpu_notice():
    import logging

    import bookkit.quiet as quiet

    quiet.quiet_import_logs()
    quiet.quiet_import_logs()  # idempotent: one filter
    logger = logging.getLogger("DeepSpeed")
    assert logger.filters.count(quiet._not_the_cpu_notice) == 1

    def record(msg):
        return logging.LogRecord("DeepSpeed", logging.WARNING, __file__, 1, msg, None, None)

    assert not logger.filter(record(quiet.DEEPSPEED_CPU_NOTICE + " If you have GPU ..."))
    assert logger.filter(record("Setting ds_accelerator to cuda (auto detect)"))
