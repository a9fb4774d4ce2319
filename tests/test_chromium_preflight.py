"""`make test` starts with scripts/ensure_chromium.sh: with chromium missing it installs
it when it can (root + apt-get) and otherwise stops at once with one clear line."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

from bookpaths import ROOT

SCRIPT = ROOT / "scripts" / "ensure_chromium.sh"


def fake_bin(tmp_path, uid: int, apt: bool, apt_works: bool = True):
    """A PATH with only bash builtins' helpers: `id` reporting `uid`, and optionally an
    `apt-get` that records its calls (and 'installs' a chromium when it works)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cat", "dirname", "chmod"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bin_dir / tool)
    (bin_dir / "id").write_text(f"#!{shutil.which('bash')}\necho {uid}\n")
    if apt:
        install = (f'echo "#!{shutil.which("bash")}" > {bin_dir}/chromium; chmod +x {bin_dir}/chromium'
                   if apt_works else "exit 100")
        (bin_dir / "apt-get").write_text(
            f'#!{shutil.which("bash")}\necho "$@" >> {tmp_path}/apt.log\n'
            f'if [ "$1" = install ]; then {install}; fi\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def run(bin_dir):
    start = time.perf_counter()
    result = subprocess.run([shutil.which("bash"), str(SCRIPT)], capture_output=True, text=True,
                            env={"PATH": str(bin_dir)}, timeout=60)
    return result, time.perf_counter() - start


def test_present_chromium_needs_nothing(tmp_path):
    bin_dir = fake_bin(tmp_path, uid=1000, apt=False)
    (bin_dir / "chromium").write_text("#!/bin/sh\n")
    (bin_dir / "chromium").chmod(0o755)
    result, _ = run(bin_dir)
    assert result.returncode == 0 and result.stdout == result.stderr == ""


def test_without_root_it_stops_at_once_with_one_line(tmp_path):
    result, seconds = run(fake_bin(tmp_path, uid=1000, apt=True))
    assert result.returncode == 1 and seconds < 5
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "chromium" in lines[0] and "apt-get install chromium" in lines[0]
    assert not (tmp_path / "apt.log").exists(), "apt-get must not run without root"


def test_as_root_with_apt_it_installs_chromium(tmp_path):
    result, _ = run(fake_bin(tmp_path, uid=0, apt=True))
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls[0].startswith("update") and calls[1].split()[-1] == "chromium"


def test_a_failed_install_is_one_clear_line(tmp_path):
    result, _ = run(fake_bin(tmp_path, uid=0, apt=True, apt_works=False))
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "chromium" in result.stderr
