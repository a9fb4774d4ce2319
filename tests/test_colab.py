"""A notebook runs like in a fresh Colab runtime: copied alone into an empty folder
outside the repository, with minigrad installed as a package (built from this
checkout by pip), not found through the working directory or the editable install."""
from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from bookpaths import NOTEBOOKS, ROOT, chapter

pytestmark = pytest.mark.book

# One torch chapter and one minigrad chapter when they exist.
CANDIDATES = [chapter("five_minutes").name, chapter("tiny_autograd").name]


@pytest.fixture(scope="module")
def installed_site(tmp_path_factory):
    """minigrad + bookkit installed by pip from this checkout into a private folder."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check",
                    "--target", str(site), str(ROOT)], check=True)
    assert (site / "minigrad" / "__init__.py").is_file()
    assert (site / "bookkit" / "__init__.py").is_file()
    return site


@pytest.mark.parametrize("name", [n for n in CANDIDATES if (NOTEBOOKS / n).is_file()])
def test_notebook_runs_outside_the_repository(name, installed_site, tmp_path, monkeypatch):
    workdir = tmp_path / "colab"
    workdir.mkdir()
    shutil.copy(NOTEBOOKS / name, workdir / name)
    # The kernel must import the pip-installed copy, never the checkout.
    monkeypatch.setenv("PYTHONPATH", str(installed_site))
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")
    monkeypatch.chdir(workdir)

    nb = nbformat.read(workdir / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import minigrad, bookkit, os\n"
        "print(os.path.dirname(os.path.dirname(minigrad.__file__)))\n"
        "print(os.path.dirname(os.path.dirname(bookkit.__file__)))"))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(workdir)}}).execute()

    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
    assert printed == [str(installed_site)] * 2, \
        f"imported from {printed}, expected the installed package in {installed_site}"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
