"""Run a command as if on another CPU: the kernels that round float32 and float64 differently.

Usage: python scripts/simulated_cpu.py COMMAND [ARGS...]
       python scripts/simulated_cpu.py            (prints the settings)

The CPU that stores a notebook's outputs is not the reader's. `make test` runs the
notebooks a second time under these settings, against the same stored outputs, so
that a printed number that holds only on one CPU fails here first. Each setting
swaps the kernels of one library for those a different x86-64 CPU would run
(measured on an AVX-512 Xeon; each changes bits of results):

- torch: ``ATEN_CPU_CAPABILITY=default`` (no AVX2/AVX-512 vectorised kernels),
  ``MKL_CBWR=COMPATIBLE`` (MKL's matmul and vector maths on the generic SSE2 path),
  ``ONEDNN_MAX_CPU_ISA=SSE41`` (oneDNN's convolutions, GELU, ... without AVX);
- NumPy's BLAS: ``OPENBLAS_CORETYPE=Prescott`` (OpenBLAS's oldest x86-64 kernels;
  of all core types it changes the most matmul results relative to SkylakeX/Haswell);
- NumPy's own loops: ``NPY_DISABLE_CPU_FEATURES`` lists every SIMD target NumPy
  dispatches to at run time, so exp, log, tanh, power, ... use the baseline code
  (AVX-512 machines otherwise use SVML-based loops, AVX2 ones others again);
- one thread: ``OMP_NUM_THREADS=1`` (and OpenBLAS's/MKL's thread counts), which
  changes how reductions are split.
"""
from __future__ import annotations

import os
import subprocess
import sys


def numpy_dispatch_targets() -> list[str]:
    """NumPy's run-time SIMD targets on this machine (``[]`` when NumPy is older)."""
    code = ("import numpy._core._multiarray_umath as m; print(' '.join(m.__cpu_dispatch__))"
            " if hasattr(m, '__cpu_dispatch__') else print('')")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout
    except subprocess.CalledProcessError:  # NumPy 1.x keeps the module in numpy.core
        code = code.replace("numpy._core", "numpy.core")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=False).stdout
    return out.split()


def settings() -> dict[str, str]:
    """The environment variables that simulate a different CPU."""
    return {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "OPENBLAS_CORETYPE": "Prescott",
        "NPY_DISABLE_CPU_FEATURES": " ".join(numpy_dispatch_targets()),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def main(argv: list[str]) -> int:
    env = settings()
    if not argv:
        for key, value in env.items():
            print(f"{key}={value!r}" if " " in value else f"{key}={value}")
        return 0
    return subprocess.run(argv, env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
