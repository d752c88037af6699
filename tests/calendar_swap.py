"""Run RM-DCWF with a chosen slot-calendar class: the current :class:`sim.workflows.calendar.Calendar`
or main c300018's (:mod:`tests.reference.calendar_c300018`), on one stream built once.

The stream (its deadlines come from SET^R, :func:`sim.workflows.budget.alone_schedule`) is built
whole, with the current calendar, *before* any swap (:func:`stream`), so two runs of it differ only
in the calendar that plans the schedule. Used by ``tests/test_rmdcwf_calendar_identity.py`` and by
``tests/bench/bench_workflows.py --only calendar``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import sim.workflows.budget  # loaded here: the swap patches the loaded modules that name Calendar
import sim.workflows.calendar
import sim.workflows.planner
from sim.core import Cluster, Workload
from sim.policies.base import Policy
from sim.policies.rmdcwf import fifo_workflow, rmdcwf
from sim.run import RunResult, run
from sim.tables import write_csv
from sim.workflows.metrics import TaskTable
from sweeps.specs import WorkflowStream
from tests.reference import calendar_c300018

#: the two calendars compared: the current one and main c300018's
CURRENT, OLD = sim.workflows.calendar.Calendar, calendar_c300018.Calendar
CALENDARS = {"current": CURRENT, "c300018": OLD}

#: label → (policy name, options): the FIFO baseline and the eight RM-DCWF configurations
#: (laxity distribution × laxity × TSP, default remap trigger)
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {"fifo_workflow": ("fifo_workflow", {})} | {
    f"{d.upper()}-{x.upper()}-{t.upper()}": ("rmdcwf", {"laxity_distribution": d, "laxity": x, "tsp": t})
    for d in ("pd", "ed") for x in ("sl", "tl") for t in ("tsp1", "tsp2")
}


def _users() -> list[Any]:
    """Every loaded ``sim`` module that holds the current calendar class under the name ``Calendar``
    (the planner, :mod:`sim.workflows.budget`'s ``alone_schedule``, …), the calendar module aside."""
    return [m for name, m in list(sys.modules.items())
            if name.startswith("sim.") and m is not sim.workflows.calendar and getattr(m, "Calendar", None) is CURRENT]


@contextmanager
def calendar_class(cls: type) -> Iterator[None]:
    """Plan with ``cls`` instead of the current calendar inside the block (module attributes patched)."""
    users = _users()
    assert any(m.__name__ == "sim.workflows.planner" for m in users), "the planner no longer names Calendar"
    for m in users:
        m.Calendar = cls
    try:
        yield
    finally:
        for m in users:
            m.Calendar = CURRENT


def stream(kind: str, rate: float, jobs: int, seed: int = 0, warmup: int | None = None,
           cluster: Cluster | None = None) -> tuple[Workload, Cluster]:
    """A ``kind`` stream of ``jobs`` workflows at λ = ``rate`` on m = 50, c_r = 2, every workflow (and
    so its deadline, from SET^R) built now, with the current calendar: a generated stream builds each
    workflow only when a run reaches it, which would put the build inside the run and the swap."""
    cluster = cluster or Cluster.slotted(50, 2)
    spec = WorkflowStream(type=kind, arrival_rate=rate, jobs=jobs, warmup=jobs // 10 if warmup is None else warmup)
    workload = spec.build(np.random.default_rng(seed), cluster)
    return dataclasses.replace(workload, workflows=tuple(workload.workflows)), cluster


def policy(label: str) -> Policy:
    """A fresh policy for a :data:`CONFIGS` label; ``LABEL/deadline`` sets ``remap_trigger=deadline``."""
    base, _, trigger = label.partition("/")
    name, options = CONFIGS[base]
    if name == "fifo_workflow":
        return fifo_workflow()
    return rmdcwf(**options, **({"remap_trigger": trigger} if trigger else {}))  # type: ignore[arg-type]


def run_with(cls: type, workload: Workload, cluster: Cluster,
             make_policy: Callable[[], Policy]) -> tuple[RunResult, dict[str, list[Any]]]:
    """``sim.run.run`` of a fresh policy planning with calendar class ``cls``: the result and its
    per-task table (the rows a ``tasks.csv`` holds, kept in memory during the run)."""
    tasks = TaskTable()
    with calendar_class(cls):
        done = run(workload, cluster, make_policy(), tasks=tasks)
    return done, tasks.columns


def table_csv(table: Mapping[str, Sequence[Any]]) -> bytes:
    """The bytes :func:`sim.tables.write_csv` writes for ``table`` (for the tasks: what ``tasks.csv`` holds)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "table.csv"
        write_csv(table, path)
        return path.read_bytes()


def digest(table: Mapping[str, Sequence[Any]]) -> str:
    """SHA-256 of :func:`table_csv` (first 16 hex digits)."""
    return hashlib.sha256(table_csv(table)).hexdigest()[:16]
