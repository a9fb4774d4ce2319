"""The published rotor solver (Beaumont et al. 2019), restated in its own model
(`tests/rotor_published.py`), and its correspondence with `minigrad.plan.rotor`.

* the restated recurrence reproduces the published solver's answers (recorded by
  ``tests/rotor_published_record.py`` from the published code, which is not part of
  this repository; ``ROTOR_PUBLISHED=folder`` also runs a live comparison);
* it minimises over the same nested schedules as `minigrad.plan.rotor`, with memory
  priced in rotor's model;
* on profiled minigrad chains, every schedule it returns runs under the ledger within
  its limit, and `minigrad.plan.rotor` at the measured peak recomputes no more.
"""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import minigrad
import minigrad.ops as F
from minigrad import memory
from minigrad import plan as P
from minigrad.checkpoint import checkpoint_sequential
import rotor_published as RP  # tests/rotor_published.py
from minigrad.plan.nested import NestedSchedule, enumerate_schedules, schedule_peak, schedule_recompute_cost

from test_plan_rotor import chain

HERE = Path(__file__).resolve().parent


def _measure(layers, x, sched, loss=None):
    """Measured (peak saved-activation bytes, recomputed FLOPs) of one step."""
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential(layers, sched, x)
        (loss(y) if loss else y.sum()).backward()
    return m.peak["activations"] - m.start["activations"], m.flops["recompute"]


def _cases():
    return json.loads((HERE / "rotor_published_cases.json").read_text())["cases"]


def _ops(text):
    return [("L",) if tok == "L" else (tok[:2] if tok[:2] in ("Fe", "CF", "Fn") else "B",
                                      int(tok[2:] if tok[:2] in ("Fe", "CF", "Fn") else tok[1:]))
            for tok in text.split()]


def test_restated_recurrence_reproduces_the_published_answers():
    # Recorded from the published solver by tests/rotor_published_record.py.
    cases = _cases()
    assert len(cases) == 60
    checked = 0
    for case in cases:
        chain_ = RP.RotorChain(*[tuple(p) for p in case["chain"]])
        opt, _ = RP.persistent_table(chain_, case["mmax"])
        top = [opt[m][0][chain_.length] for m in range(case["mmax"] + 1)]
        assert top == [math.inf if v is None else v for v in case["opt_top"]]
        for limit, text in case["sequences"].items():
            if text is None:
                with pytest.raises(ValueError):
                    RP.persistent_sequence(chain_, int(limit))
            else:
                assert RP.persistent_sequence(chain_, int(limit)) == _ops(text)
                checked += 1
    assert checked > 100


@pytest.mark.skipif(not os.environ.get("ROTOR_PUBLISHED"),
                    reason="set ROTOR_PUBLISHED to a folder with the published persistent.py")
def test_live_agreement_with_the_published_solver():
    import rotor_published_record as rec

    counts = rec.compare(rec.load_published(os.environ["ROTOR_PUBLISHED"]), 300, seed=99)
    assert counts["tables"] == 300 and counts["sequences"] > 500


def _random_rotor_chain(rng, L):
    cw = [int(v) for v in rng.integers(0, 5, size=L + 1)]
    return RP.RotorChain(tuple(int(v) for v in rng.integers(0, 6, size=L)),
                         tuple(int(v) for v in rng.integers(0, 6, size=L + 1)), tuple(cw),
                         tuple(c + int(rng.integers(0, 5)) for c in cw),
                         tuple(int(v) for v in rng.integers(0, 3, size=L)),
                         tuple(int(v) for v in rng.integers(0, 3, size=L + 1)))


def _expressible_in_rotor(ch, n):
    """``(schedule, memory in rotor's model)`` for every nested schedule rotor can express."""
    for items in enumerate_schedules(n):
        s = NestedSchedule(n=n, items=items)
        try:
            yield s, RP.rotor_model_memory(ch, s)
        except ValueError:
            continue  # a checkpoint over the whole rest of a level


@pytest.mark.parametrize("seed", range(8))
def test_published_recurrence_searches_the_same_schedules(seed):
    # Rotor's optimum at each memory is the least makespan over the nested schedules
    # (those without a checkpoint over the whole rest of a level) that fit its model.
    rng = np.random.default_rng(seed)
    L = 1 + seed % 5
    ch = _random_rotor_chain(rng, L)
    mmax = 35
    opt, _ = RP.persistent_table(ch, mmax)
    expressible = []
    for s, mem in _expressible_in_rotor(ch, L):
        ops = RP.sequence_from_schedule(s)
        assert RP.schedule_from_sequence(ops, L) == s
        expressible.append((mem, RP.sequence_makespan(ch, ops)))
    loss_bw = ch.bweigth[L]  # opt counts the loss's backward, the published makespan does not
    for limit in range(mmax + 1):
        m = limit - ch.cweigth[0]
        published = opt[m][0][L] if 0 < m <= mmax else math.inf
        best = min([c for mem, c in expressible if mem <= limit], default=math.inf) + loss_bw
        assert math.isclose(best, published) or best == published == math.inf, (limit, best, published)
        if published < math.inf:
            ops = RP.persistent_sequence(ch, limit)
            s = RP.schedule_from_sequence(ops, L)
            assert RP.rotor_model_memory(ch, s) <= limit
            assert math.isclose(RP.sequence_makespan(ch, ops) + loss_bw, published)


@pytest.mark.parametrize("seed", range(6))
def test_published_schedules_on_minigrad_chains(seed):
    # The published model on a profiled chain (to_rotor_chain): it over-counts the
    # ledger for every schedule, so each schedule it returns runs within its limit,
    # and rotor, at the peak that schedule measures, recomputes no more.
    layers, x = chain(500 + seed, 3 + seed % 4, grad=bool(seed % 2))
    loss = (lambda y: F.mse_loss(y, minigrad.Tensor(np.zeros(y.shape, np.float32)))) if seed % 3 == 1 else None
    profile = P.profile_chain(layers, x, loss=loss)
    n = profile.n
    slot = 4  # float32 arrays: every size is a multiple of 4 bytes, so slots are exact
    ch = RP.to_rotor_chain(profile, slot_bytes=slot)
    assert ch.length == n and list(ch.cweigth) == [b // slot for b in profile.input_bytes] + [profile.output_bytes // slot]
    for s, mem in _expressible_in_rotor(ch, n):
        assert mem * slot >= schedule_peak(profile, s)
    top = sum(ch.cweigth) + sum(ch.cbweigth) + 2
    table = RP.persistent_table(ch, top)
    runs = 0
    for limit in range(top + 1):
        try:
            ops = RP.persistent_sequence(ch, limit, table=table)
        except ValueError:
            continue
        s = RP.schedule_from_sequence(ops, n)
        peak, flops = _measure(layers, x, s, loss)
        assert peak == schedule_peak(profile, s) <= limit * slot
        assert flops == schedule_recompute_cost(profile, s) == RP.sequence_makespan(ch, ops) - sum(ch.fweigth)
        mine = P.rotor(profile, budget_bytes=peak)
        assert mine.recompute_cost <= flops
        runs += 1
    assert runs > 0


def test_to_rotor_chain_maps_the_profile():
    layers, x = chain(3, 3)

    def loss(y):
        return F.mse_loss(y, minigrad.Tensor(np.zeros(y.shape, np.float32)))
    profile = P.profile_chain(layers, x, loss=loss)
    ch = RP.to_rotor_chain(profile, slot_bytes=1)
    assert ch.length == 3 and list(ch.fweigth) == list(profile.cost)
    assert list(ch.cweigth) == list(profile.input_bytes) + [profile.output_bytes]  # x_L: the loss's input
    for i in range(3):
        assert ch.cbweigth[i + 1] == ch.cweigth[i + 1] + profile.own_bytes[i]
    assert list(ch.fwd_tmp) == [0, 0, 0] and list(ch.bwd_tmp) == [0, 0, 0, profile.loss_own_bytes]
    assert RP.to_rotor_chain(profile, slot_bytes=16).cweigth[0] == -(-profile.input_bytes[0] // 16)
    with pytest.raises(ValueError, match="slot_bytes"):
        RP.to_rotor_chain(profile, slot_bytes=0)
    with pytest.raises(ValueError, match="x_size has 2 entries"):
        RP.RotorChain((1, 2), (0, 0, 0), (1, 1), (1, 1, 1), (0, 0), (0, 0, 0))
