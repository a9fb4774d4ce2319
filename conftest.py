"""Root pytest configuration: loads tests/nbval_figures.py, which makes strict nbval
compare stored figures too (nbval alone skips image/png), and tests/nbval_stderr.py,
which fails every notebook cell that writes to stderr (as make book's strict build
does)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

pytest_plugins = ["nbval_figures", "nbval_stderr"]
