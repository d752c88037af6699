"""The calendar is an implementation detail: planning with main c300018's calendar
(``tests/reference/calendar_c300018.py``) or with the current one writes byte-identical
``tasks.csv`` (and workflow tables, and remapping counters), for the FIFO baseline, all eight
RM-DCWF configurations and the deadline remap trigger, on small fixed streams of each workload at
its high-load λ (issue #27 B6). Each stream is built once, with the current calendar (its deadlines
come from SET^R), so only the schedule is compared. Below the runs, both calendars answer every
query alike after random bookings, removals, prunes and restores. The 2,000-workflow comparison
and the timing are ``python tests/bench/bench_workflows.py --only calendar``.
"""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core import Cluster, Workload
from tests.calendar_swap import CALENDARS, CONFIGS, CURRENT, OLD, policy, run_with, stream, table_csv

#: workload → (λ, workflows, seed): the paper's high-load point; seeds whose runs remap (with restores)
STREAMS = {"cybershake": (1 / 18, 60, 3), "ligo": (1 / 150, 60, 0), "genome": (1 / 1800, 60, 1)}
#: the FIFO baseline, the eight configurations (sub-deadline trigger) and two with the deadline trigger
LABELS = (*CONFIGS, "PD-SL-TSP1/deadline", "ED-SL-TSP2/deadline")


@functools.cache
def _stream(kind: str) -> tuple[Workload, Cluster]:
    rate, jobs, seed = STREAMS[kind]
    return stream(kind, rate, jobs, seed=seed)


@functools.cache
def schedules(kind: str, label: str) -> dict[str, tuple[bytes, bytes, dict[str, float]]]:
    """Calendar name → (tasks.csv bytes, workflows.csv bytes, remapping counters) of one run."""
    workload, cluster = _stream(kind)
    out = {}
    for name, cls in CALENDARS.items():
        done, tasks = run_with(cls, workload, cluster, lambda: policy(label))
        counters = {k: v for k, v in done.summary.items() if k.startswith("remap/")}
        out[name] = (table_csv(tasks), table_csv(done.tables["workflows"]), counters)
    return out


def first_difference(a: bytes, b: bytes) -> str:
    for n, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), 1):
        if x != y:
            return f"line {n}: {x.decode()!r} != {y.decode()!r}"
    return f"{len(a.splitlines())} lines != {len(b.splitlines())} lines"


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("kind", STREAMS)
def test_both_calendars_write_the_same_tables(kind: str, label: str) -> None:
    runs = schedules(kind, label)
    (new_tasks, new_workflows, new_counters), (old_tasks, old_workflows, old_counters) = (
        runs["current"], runs["c300018"])
    assert new_tasks.count(b"\n") == 1 + sum(len(wf.tasks) for wf in _stream(kind)[0].workflows)
    assert new_tasks == old_tasks, first_difference(new_tasks, old_tasks)
    assert new_workflows == old_workflows, first_difference(new_workflows, old_workflows)
    assert new_counters == old_counters


def test_the_comparison_covers_remapping_and_restores() -> None:
    """Otherwise the identity above would say nothing about the remapping paths (removals, overlap
    queries, snapshot and restore)."""
    counters = {(kind, label): schedules(kind, label)["current"][2] for kind in STREAMS for label in LABELS}
    assert sum(c.get("remap/attempts", 0) > 0 for c in counters.values()) >= 5
    assert any(c.get("remap/restores", 0) > 0 for c in counters.values())
    assert all(counters["cybershake", label].get("remap/attempts", 0) > 0 for label in ("ED-SL-TSP2", "ED-TL-TSP2"))


#: times and durations: whole seconds, fractions that do not add exactly, and t ≈ 1e9 where 1e-8 s is lost
BASES = (0.0, 0.0, 1e9)
STEPS = (0.0, 0.1, 0.3, 0.5, 1.0, 2.5, 3.0, 7.0)
DURATIONS = (0.1, 0.3, 1.0, 2.0, 2.5, 4.0, 1e-8)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_every_query_answers_as_c300018(data: st.DataObject) -> None:
    m, c = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    base = data.draw(st.sampled_from(BASES))
    new, old = CURRENT(m, c), OLD(m, c)
    saved = None
    for key in range(data.draw(st.integers(1, 40))):
        op = data.draw(st.sampled_from(("insert", "insert", "insert", "remove", "prune", "save", "restore", "none")))
        t = base + data.draw(st.sampled_from(STEPS)) * data.draw(st.integers(0, 8))
        if op == "insert":
            r, k = data.draw(st.integers(0, m - 1)), data.draw(st.integers(0, c - 1))
            e = data.draw(st.sampled_from(DURATIONS))
            try:
                new.insert(key, r, k, t, e)
            except ValueError:
                with pytest.raises(ValueError):
                    old.insert(key, r, k, t, e)
                continue
            old.insert(key, r, k, t, e)
        elif op == "remove" and len(new):
            victim = data.draw(st.sampled_from(sorted(new.overlapping(-math.inf, math.inf))))
            new.remove(victim)
            old.remove(victim)
        elif op == "prune":
            assert new.prune(t) == old.prune(t)
        elif op == "save":
            saved = new.snapshot(), old.snapshot()
        elif op == "restore" and saved is not None:
            new.restore(saved[0])
            old.restore(saved[1])
        e = data.draw(st.sampled_from(DURATIONS))
        slack = data.draw(st.sampled_from((0.0, 0.5, 3.0)))
        assert new.earliest(t, e) == old.earliest(t, e)
        assert new.latest(t, t + e + slack, e) == old.latest(t, t + e + slack, e)
        assert list(new.overlapping(t, t + slack)) == list(old.overlapping(t, t + slack))
        assert len(new) == len(old)
