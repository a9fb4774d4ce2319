"""A test's time limit (the runner's SIGALRM handler) never strikes while the grader's kit
has minigrad patched: a correct notebook that ran out of time on a busy machine loses
that test's points, not the whole notebook's for "tampering detected" (which a4's
solution got, two grades in three, at a 1 s limit, before the handler waited)."""
from __future__ import annotations

import signal
import sys

import pytest
from bookpaths import ROOT

sys.path.insert(0, str(ROOT / "assignments"))
from grading import kit, runner

import minigrad.checkpoint

MODULES = ["minigrad.checkpoint"]


@pytest.fixture
def alarm():
    """(handler, rearmed): the runner's handler, with the re-arming calls it made; the
    tests below are the "hidden tests" allowed to call kit.library_refused."""
    rearmed = []
    callers = {id(f.__code__) for f in (test_the_limit_waits_while_the_stubs_go_in_and_strikes_inside_the_block,
                                        test_the_limit_waits_while_the_stubs_are_put_back,
                                        test_the_limit_waits_half_a_second_at_most)}
    return runner.alarm_handler(lambda *a: rearmed.append(a), callers), rearmed


def alarm_in_setup(handler, monkeypatch, alarms: int = 1) -> list:
    """Strike the alarm ``alarms`` times as library_refused starts patching (when it looks
    up its modules); returns the outcomes ("waited" or "struck")."""
    modules = kit._modules
    outcomes = []

    def modules_then_alarm(names):
        for _ in range(alarms):
            try:
                handler(signal.SIGALRM, sys._getframe())
                outcomes.append("waited")
            except runner.TimeLimit:
                outcomes.append("struck")
        return modules(names)

    monkeypatch.setattr(kit, "_modules", modules_then_alarm)
    return outcomes


def test_the_limit_waits_while_the_stubs_go_in_and_strikes_inside_the_block(alarm, monkeypatch):
    handler, rearmed = alarm
    outcomes = alarm_in_setup(handler, monkeypatch)
    with pytest.raises(runner.TimeLimit), kit.library_refused(MODULES, "your code"):
        handler(signal.SIGALRM, sys._getframe())  # the test's own code: the limit strikes
    assert outcomes == ["waited"] and rearmed == [(signal.ITIMER_REAL, 0.005)]
    assert minigrad.checkpoint.checkpoint.__module__ == "minigrad.checkpoint", \
        "a limit that struck inside the block left minigrad's stub in place"


def test_the_limit_waits_while_the_stubs_are_put_back(alarm, monkeypatch):
    """Restoring: the alarm arrives as the first name is put back (setattr on a module)."""
    handler, _ = alarm
    original = minigrad.checkpoint.checkpoint
    outcomes = []

    class Spy(type(minigrad.checkpoint)):
        def __setattr__(self, name, value):
            if value is original and not outcomes:
                try:
                    handler(signal.SIGALRM, sys._getframe())
                    outcomes.append("waited")
                except runner.TimeLimit:
                    outcomes.append("struck")
            super().__setattr__(name, value)

    cls = type(minigrad.checkpoint)
    monkeypatch.setattr(minigrad.checkpoint, "__class__", Spy)
    try:
        with kit.library_refused(MODULES, "your code"):
            pass
    finally:
        object.__setattr__(minigrad.checkpoint, "__class__", cls)
    assert outcomes == ["waited"], outcomes
    assert minigrad.checkpoint.checkpoint is original


def notebook_code():
    """library_refused called by code that is not a hidden test's (a notebook's)."""
    with kit.library_refused(MODULES, "a notebook"):
        pass


def test_library_refused_called_by_a_notebook_gets_no_wait(alarm, monkeypatch):
    handler, rearmed = alarm
    outcomes = alarm_in_setup(handler, monkeypatch)
    notebook_code()
    assert outcomes == ["struck"] and rearmed == []


def test_the_limit_waits_half_a_second_at_most(alarm, monkeypatch):
    handler, rearmed = alarm
    outcomes = alarm_in_setup(handler, monkeypatch, alarms=runner.ALARM_MAX_WAITS + 1)
    with kit.library_refused(MODULES, "your code"):
        pass
    assert outcomes == ["waited"] * runner.ALARM_MAX_WAITS + ["struck"]
    assert len(rearmed) * 0.005 <= 0.5


def test_elsewhere_the_limit_strikes_at_once(alarm):
    handler, rearmed = alarm
    with pytest.raises(runner.TimeLimit):
        handler(signal.SIGALRM, sys._getframe())
    with pytest.raises(runner.TimeLimit):
        handler(signal.SIGALRM, None)
    assert rearmed == []
