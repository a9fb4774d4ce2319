"""Shared test configuration: a bounded hypothesis profile for CI (the default here), and
a scratch copy of the repository for tests that follow a maintainer's path."""
import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, settings

from bookpaths import ROOT

settings.register_profile("ci", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def scratch(tmp_path):
    """The repository's files (tracked and untracked, not ignored) in a scratch folder
    that shares this checkout's .venv."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    copy = tmp_path / "repo"
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    (copy / ".venv").symlink_to((ROOT / ".venv").resolve())
    return copy



def pytest_ignore_collect(collection_path, config):
    """With ``-m book`` alone (`make test`'s phase 4), a test file that never names the
    ``book`` mark holds no test it selects: it is not imported (each worker would import
    every test module, torch's included, to deselect it)."""
    if config.getoption("markexpr", "") != "book":
        return None
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_") \
            and "pytest.mark.book" not in collection_path.read_text():
        return True
    return None
