"""assignments/grading/driver.py's reading of a runner, without a sandbox or a notebook:
fake runners (a few lines of Python) play the runner's part and the attacker's."""
from __future__ import annotations

import sys
import time

import pytest

from bookpaths import ROOT

sys.path.insert(0, str(ROOT / "assignments"))
from grading import driver  # noqa: E402

PLAN = [{"kind": "test", "question": "q1", "test": "test_a", "tests": "", "graded": [], "fixtures": [],
         "fixture_names": [], "seed": 0, "index": 0, "id": "q1/test_a", "points": 1.0, "hidden": False}]


def fake_runner(body: str):
    return lambda: [sys.executable, "-c", "import json, os, sys\n" + body]


def run(body: str, per_test_s: float = 5.0) -> dict:
    return driver.run_notebook(fake_runner(body), [], [], PLAN, per_test_s)


def test_a_well_behaved_runner_gives_its_answers():
    got = run("""sys.stdin.readline()
print(json.dumps({"kind": "loaded", "cell_errors": []}), flush=True)
sys.stdin.readline()
print(json.dumps({"kind": "answers", "test": "test_a", "record": {"answers": [], "error": None},
                  "tampered": ""}), flush=True)
print(json.dumps({"kind": "ended", "test": "test_a", "status": 0}), flush=True)
sys.stdin.readline()""")
    assert got["records"] == {"q1/test_a": {"answers": [], "error": None}} and not got["tampered"]
    assert got["starts"] == 1


def test_a_flood_without_newline_is_cut_at_the_cap_in_linear_time():
    start = time.monotonic()
    got = run("""sys.stdin.readline()
chunk = b"x" * (1 << 20)
for _ in range(80):
    os.write(1, chunk)""")
    assert got["tampered"].startswith("the results channel carried more than"), got["tampered"]
    assert time.monotonic() - start < 20, "reading a flood must be linear in its size"


def test_forged_messages_are_tampering():
    for line in ('"not a dict"', '{"kind": "result", "passed": true}', "garbage"):
        got = run(f"""sys.stdin.readline()
print({line!r}, flush=True)""")
        assert got["tampered"], line


def test_a_message_about_another_test_is_tampering():
    """(Answers for the test that runs are the notebook's own answers, forged or not: the
    judge compares them with the reference's.)"""
    got = run("""sys.stdin.readline()
print(json.dumps({"kind": "loaded", "cell_errors": []}), flush=True)
sys.stdin.readline()
print(json.dumps({"kind": "answers", "test": "test_b", "record": {"answers": [], "error": None},
                  "tampered": ""}), flush=True)
sys.stdin.readline()""")
    assert got["tampered"].startswith("an unexpected message"), got


def test_a_load_that_ends_the_process_skips_that_cell_and_starts_again():
    body = """load = json.loads(sys.stdin.readline())
skip = load["skip"]
print(json.dumps({"kind": "cell", "index": 7}), flush=True)
if 7 not in skip:
    os._exit(1)
print(json.dumps({"kind": "loaded", "cell_errors": ["cell 7: skipped"]}), flush=True)
sys.stdin.readline()
print(json.dumps({"kind": "stopped", "test": "test_a", "why": "timeout"}), flush=True)
sys.stdin.readline()"""
    got = run(body)
    assert got["starts"] == 2 and got["cell_errors"] == ["cell 7: skipped"]
    assert got["records"]["q1/test_a"]["error"].startswith("TimeoutError")


@pytest.mark.slow  # waits out the driver's deadline
def test_a_silent_runner_is_stopped_at_its_deadline(monkeypatch):
    """A runner that answers nothing after a test's command is stopped at the test's limit
    plus twice the restart slack (shortened here: the wait is the same code)."""
    monkeypatch.setattr(driver, "RESTART_SLACK_S", 1.0)
    start = time.monotonic()
    got = run("""sys.stdin.readline()
print(json.dumps({"kind": "loaded", "cell_errors": []}), flush=True)
sys.stdin.readline()
import time
time.sleep(600)""", per_test_s=1.0)
    assert "ended before it answered" in got["records"]["q1/test_a"]["error"]
    assert 3.0 <= time.monotonic() - start < 12


def test_each_test_is_timed_from_its_command_to_its_answers():
    got = run("""sys.stdin.readline()
print(json.dumps({"kind": "loaded", "cell_errors": []}), flush=True)
sys.stdin.readline()
import time
time.sleep(0.3)
print(json.dumps({"kind": "answers", "test": "test_a", "record": {"answers": [], "error": None},
                  "tampered": ""}), flush=True)
print(json.dumps({"kind": "ended", "test": "test_a", "status": 0}), flush=True)
sys.stdin.readline()""")
    assert 0.3 <= got["seconds"]["q1/test_a"] < 5, got["seconds"]


def test_the_reference_gets_a_generous_limit_and_names_its_slow_tests(monkeypatch, capsys):
    """The expected answers must not depend on the machine's load: the reference runs each
    test with at least REFERENCE_MIN_LIMIT_S; a test over the students' limit is named."""
    seen = {}

    def fake_run(command, cells, given, plan, per_test_s, **kwargs):
        seen["limit"] = per_test_s
        return {"records": {"q1/test_a": {"answers": [], "error": None}}, "cell_errors": [],
                "tampered": "", "log": b"", "starts": 1, "seconds": {"q1/test_a": 7.5}}

    monkeypatch.setattr(driver, "run_notebook", fake_run)
    monkeypatch.setattr(driver, "plan_tests", lambda payload: PLAN)
    monkeypatch.setattr(driver.probes, "reference_problems", lambda records: [])
    records = driver.reference_records({"reference": [], "given": []}, None, 5.0)
    assert records == {"q1/test_a": {"answers": [], "error": None}}
    assert seen["limit"] == driver.REFERENCE_MIN_LIMIT_S >= 60
    assert "q1/test_a 7.5 s" in capsys.readouterr().err
    driver.reference_records({"reference": [], "given": []}, None, 10.0)
    assert capsys.readouterr().err == ""
