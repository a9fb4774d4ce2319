#!/usr/bin/env bash
# Try Rockmate (the PyTorch rematerialization planner, `rockmate` on PyPI) on the
# GPT-style stack of chapter 7b, on this machine's CPU. Needs PyPI; not part of
# `make test`. Installs into a scratch folder, never into .venv; prints what happens.
# Usage: scripts/rockmate_on_cpu.sh [VERSION]   (default: every version on PyPI)
set -u
PY=${PY:-.venv/bin/python}
for version in ${1:-2.0.0 1.0.1}; do
    dir=$(mktemp -d)
    rkgb=$([ "$version" = 1.0.1 ] && echo "rkgb==1.0.1" || echo "rkgb")
    "$PY" -m pip install -q --target "$dir" --no-deps "rockmate==$version" "$rkgb" \
        "pulp==2.7.0" configmypy astunparse six 2>&1 | grep -v '^WARNING' >&2
    echo "== rockmate $version"
    ROCKMATE_DIR="$dir" "$PY" - <<'PYEOF'
import os, sys
sys.path.append(os.environ["ROCKMATE_DIR"])
import torch
from bookkit.torchmodels import GPTBlock
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available())
try:
    import rockmate
    Rockmate = rockmate.Rockmate
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[GPTBlock(16, 2, dropout=0.0) for _ in range(2)])
    x = torch.randn(2, 8, 16)
    y = Rockmate(model, x, budget=10**6)(x)
    y.sum().backward()
    print("ran on CPU")
except Exception as e:
    print(f"{type(e).__name__}: {e}")
PYEOF
    rm -rf "$dir"
done
