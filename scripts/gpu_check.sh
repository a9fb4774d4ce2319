#!/usr/bin/env bash
# GPU check of Part II: run every Part II notebook (ch00, ch07-ch12, those that exist)
# on a GPU with BOOK_MEASUREMENTS set, then compare each CUDA allocator figure the
# notebooks record with the CPU figure that predicts it, and write reports/gpu_check.md
# with the date and the GPU model.
#
# Tolerance (applied in scripts/gpu_report.py, which explains it):
#     |CUDA - CPU| <= max(10 % of the CPU figure, 64 KiB)
#
# Usage:  scripts/gpu_check.sh            (from anywhere in the repository)
#         PYTHON=/path/to/python scripts/gpu_check.sh
# PYTHON must have a CUDA build of torch plus the book's requirements (the pinned
# .venv holds a CPU-only torch). The stored notebooks are not modified: the executed
# copies go to a temporary folder (kept when something fails, and named in the output).
# Exit status: 0 all pairs agree, 1 a pair disagrees or a notebook failed, 2 no GPU.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}

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
    || refuse "$PYTHON has no CUDA-enabled torch (torch.cuda.is_available() is False); set PYTHON to one that has."

notebooks=()
for id in ch00 ch07 ch08 ch09 ch10 ch11 ch12; do
    for nb in notebooks/"${id}"_*.ipynb; do
        [ -e "$nb" ] && notebooks+=("$nb")
    done
done
[ ${#notebooks[@]} -gt 0 ] || { echo "gpu_check: no Part II notebook found" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
export BOOK_MEASUREMENTS="$work/measurements.jsonl"
: > "$BOOK_MEASUREMENTS"
echo "gpu_check: $GPU_NAME; ${#notebooks[@]} notebooks; work folder $work"

status=0
"$PYTHON" scripts/gpu_report.py execute "$work/executed" "${notebooks[@]}" || status=1
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
