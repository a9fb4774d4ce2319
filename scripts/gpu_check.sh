#!/usr/bin/env bash
# GPU check: run every notebook with GPU cells (`gpu_report.py notebooks` lists them)
# on a GPU with BOOK_MEASUREMENTS set, measure the calculator's
# CUDA figures (every recipe of estimate_training_memory(device="cuda") against the
# CUDA allocator: `gpu_report.py calculator`), then compare each CUDA
# allocator figure the notebooks record with the CPU figure that predicts it, and write
# reports/gpu_check.md with the date, the GPU model, its compute capability and the
# attention kernel it runs.
#
# Tolerances (applied in scripts/gpu_report.py, which explains them):
#     held after the forward pass: |CUDA - CPU| <= max(1 % of the CPU figure, 4 KiB)
#     peaks over a step:           |CUDA - CPU| <= max(10 % of the CPU figure, 64 KiB)
#
# Usage:  scripts/gpu_check.sh            (from anywhere in the repository)
#         PYTHON=/path/to/python scripts/gpu_check.sh
# PYTHON (default: python3) must have a CUDA build of torch: the GPU machine's own, as
# in Colab. Do not use the book's .venv, whose pinned torch is CPU-only, and do not
# install requirements.txt on a GPU machine for the same reason. The script installs
# into PYTHON only what the notebooks need and it lacks (never torch), and runs the
# notebooks with that same interpreter, importing this checkout's minigrad and bookkit.
# The stored notebooks are not modified: the executed copies go to a temporary folder
# (kept when something fails, and named in the output).
# Exit status: 0 all pairs agree, 1 a pair disagrees or a notebook failed, 2 no GPU.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

refuse() {
    echo "gpu_check: $1" >&2
    echo "gpu_check: this script needs an NVIDIA GPU; nothing was run and no report was written." >&2
    exit 2
}

command -v nvidia-smi >/dev/null 2>&1 || refuse "nvidia-smi not found: no NVIDIA driver on this machine."
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) \
    || refuse "nvidia-smi failed: no usable GPU."
[ -n "$GPU_NAME" ] || refuse "nvidia-smi lists no GPU."
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
    || refuse "$PYTHON has no CUDA-enabled torch (torch.cuda.is_available() is False); set PYTHON to one that has (not the book's .venv: its torch is CPU-only)."

# What the notebooks import and this Python lacks, at the pinned versions; never torch.
"$PYTHON" scripts/gpu_report.py setup

# Every chapter with a GPU branch (a code cell testing DEVICE == "cuda"), found, not listed.
mapfile -t notebooks < <("$PYTHON" scripts/gpu_report.py notebooks)
[ ${#notebooks[@]} -gt 0 ] || { echo "gpu_check: no notebook with GPU cells found" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
export BOOK_MEASUREMENTS="$work/measurements.jsonl"
: > "$BOOK_MEASUREMENTS"
echo "gpu_check: $GPU_NAME; ${#notebooks[@]} notebooks; $PYTHON; work folder $work"

status=0
"$PYTHON" scripts/gpu_report.py execute "$work/executed" "${notebooks[@]}" || status=1
# The calculator row: estimate_training_memory(device="cuda") against the CUDA allocator,
# every precision x attention x dropout x recomputation (records keyed calc_*).
"$PYTHON" scripts/gpu_report.py calculator || status=1
mkdir -p reports
"$PYTHON" scripts/gpu_report.py compare "$BOOK_MEASUREMENTS" "$work/executed/runs.json" \
    reports/gpu_check.md --gpu "$GPU_NAME" || status=1
cp "$BOOK_MEASUREMENTS" reports/gpu_measurements.jsonl

if [ "$status" -eq 0 ]; then
    rm -rf "$work"
    echo "gpu_check: all figures agree; see reports/gpu_check.md"
else
    echo "gpu_check: see reports/gpu_check.md; executed notebooks kept in $work/executed" >&2
fi
exit "$status"
