"""The open stream of deadline-constrained workflows (RMDCWF.md, "Workloads" and "Deadline budgeting").

Poisson arrivals at ``arrival_rate``; ``s_j = at_j`` or, with probability ½, ``at_j + DU(1, s_max)``;
``em ~ U(1, em_max)``; ``d_j = ceil(s_j + SET^R · em)`` with SET^R from :func:`alone_schedule` on the
run's own m × c_r system. Arrivals, DAGs, start offsets and em come from four child generators of
the seed's generator, drawn the same way whatever the parameters (common random numbers): changing
λ, s_max, em_max or m rescales the same draws, and the DAGs never change.

Memory: a stream (:class:`OpenStream`) draws its arrivals, start offsets and em up front (a few
numbers per workflow) and builds each workflow — DAG, SET^R, tasks — only when iteration reaches it,
so a run holds only the workflows it has not finished.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from sim.core import InputError, Job, Workflow, Workload
from sim.workflows.budget import alone_schedule, schedule_length
from sim.workflows.dag import critical_path, topological_order
from sim.workflows.generators import GENERATORS, Dag, size_mix
from sim.workflows.limits import MAX_SECONDS, MAX_TASKS, check_size, check_time
from sim.workloads.errors import check_rate, time_error


def make_workflow(wid: int, first_task: int, arrival: float, earliest_start: float, deadline: float,
                  runtimes: Sequence[float], parents: Sequence[Sequence[int]], machines: int, slots: int,
                  kind: str = "", where: str = "workflow", alone: Sequence[float] | None = None) -> Workflow:
    """A :class:`Workflow` whose tasks get global ids ``first_task``.. (parents shifted likewise) and
    its SET^R schedule (``alone``: its task completions, when the caller already has them). Refuses a
    workflow beyond the bounds of :mod:`sim.workflows.limits` (its size on this system, a time above
    ``MAX_SECONDS``), naming ``where``."""
    check_size(len(runtimes), machines, slots, where)
    for field, value in (("arrival", arrival), ("earliest_start", earliest_start), ("deadline", deadline)):
        check_time(value, where, field)
    late = next((t for t, e in enumerate(runtimes) if not e <= MAX_SECONDS), None)
    if late is not None:
        raise time_error(f"{where}: task {late}", "runtime", repr(runtimes[late]))
    topological_order(parents, where)
    if alone is None:  # with the planner's inputs (floats), so SL budgeting may reuse it bit for bit
        alone = alone_schedule([float(e) for e in runtimes], parents, machines, slots, float(earliest_start))
    tasks = tuple(Job(first_task + t, float(arrival), (1,), float(e), float(e), workflow=wid,
                      parents=tuple(first_task + p for p in parents[t])) for t, e in enumerate(runtimes))
    return Workflow(wid, float(arrival), float(earliest_start), float(deadline), tasks,
                    set_r=schedule_length(alone, earliest_start), work=float(sum(runtimes)),
                    critical_path=critical_path(runtimes, parents), kind=kind, alone_finish=tuple(alone),
                    alone_shape=(machines, slots))


def check_stream(jobs: int, warmup: int, arrival_rate: float, s_max: int, em_max: float) -> None:
    """Raise :class:`InputError` naming the ``workload.`` field that is out of range."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs <= 0:
        raise InputError(f"workload.jobs must be a positive integer, got {jobs!r}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or not 0 <= warmup < jobs:
        raise InputError(f"workload.warmup must be an integer in [0, jobs = {jobs}), got {warmup!r}")
    if not _number(arrival_rate) or arrival_rate <= 0:
        raise InputError(f"workload.arrival_rate must be a positive number of jobs per second, got {arrival_rate!r}")
    check_rate(jobs, arrival_rate, "workload.arrival_rate")
    if not isinstance(s_max, int) or isinstance(s_max, bool) or s_max < 1:
        raise InputError(f"workload.s_max must be an integer ≥ 1 (seconds), got {s_max!r}")
    if s_max > MAX_SECONDS:
        raise InputError(f"workload.s_max must be at most {MAX_SECONDS:g} (seconds, the time bound), got {s_max!r}")
    if not _number(em_max) or em_max < 1:
        raise InputError(f"workload.em_max must be a number ≥ 1 (deadline multiplier bound), got {em_max!r}")


@dataclass(frozen=True, eq=False)
class OpenStream:
    """The workflows of an open stream (see the module docstring), each built when iteration reaches
    it; iterating again builds the same workflows."""

    draw_dag: Callable[[np.random.Generator], Dag]
    dag_rng: np.random.Generator  # the DAG child generator before its first draw
    arrivals: np.ndarray
    delayed: np.ndarray
    offsets: np.ndarray
    em: np.ndarray
    machines: int
    slots: int
    source: str = ""
    kind: str = ""

    def __len__(self) -> int:
        return len(self.arrivals)

    def __iter__(self) -> Iterator[Workflow]:
        r_dag = copy.deepcopy(self.dag_rng)
        first = 0
        for j in range(len(self)):
            dag = self.draw_dag(r_dag)
            at = float(self.arrivals[j])
            start = at + float(self.offsets[j]) if self.delayed[j] else at
            where = f"{self.source}: workflow {j}"
            check_size(len(dag.runtimes), self.machines, self.slots, where)  # before SET^R, the first use of its size
            alone = alone_schedule(dag.runtimes, dag.parents, self.machines, self.slots, start)
            deadline = math.ceil(start + schedule_length(alone, start) * float(self.em[j]))  # SET^R · em
            wf = make_workflow(j, first, at, start, deadline, dag.runtimes, dag.parents, self.machines, self.slots,
                               kind=self.kind, where=where, alone=alone)
            first += len(wf.tasks)
            yield wf


def open_stream(rng: np.random.Generator, draw_dag: Callable[[np.random.Generator], Dag], *, jobs: int,
                arrival_rate: float, s_max: int, em_max: float, machines: int, slots: int, warmup: int = 0,
                source: str = "", kind: str = "") -> Workload:
    """``jobs`` workflows, each DAG from ``draw_dag`` on the DAG child generator (see module doc),
    as an :class:`OpenStream`."""
    check_stream(jobs, warmup, arrival_rate, s_max, em_max)
    r_arrive, r_dag, r_start, r_em = rng.spawn(4)
    arrivals = np.cumsum(r_arrive.standard_exponential(jobs)) / arrival_rate
    delayed = r_start.random(jobs) < 0.5
    offsets = 1 + np.floor(r_start.random(jobs) * s_max)  # DU(1, s_max)
    em = 1 + r_em.random(jobs) * (em_max - 1)
    stream = OpenStream(draw_dag, r_dag, arrivals, delayed, offsets, em, machines, slots, source, kind)
    return Workload(source=source, kind="workflow", workflows=stream, warmup=warmup)


def workflow_stream(rng: np.random.Generator, type: str, *, n: int = 50, size: float | None = None,
                    **stream: object) -> Workload:
    """An open stream of ``type`` (cybershake | ligo | genome) workflows of ``n`` tasks, or with
    ``size`` of that mean task count (:func:`sized_draw`); ``stream`` are :func:`open_stream`'s keywords."""
    if type not in GENERATORS:
        raise InputError(f"workload.type must be one of {', '.join(GENERATORS)}, got {type!r}")
    if size is not None:
        return open_stream(rng, sized_draw(type, size), source=f"{type}(size={size})", kind=type,
                           **stream)  # type: ignore[arg-type]
    if not isinstance(n, int) or isinstance(n, bool) or n > MAX_TASKS:
        raise InputError(f"workload.n must be an integer task count ≤ {MAX_TASKS:,} (sim.workflows.limits), got {n!r}")
    generate = GENERATORS[type]
    generate(np.random.default_rng(0), n)  # raises for an n too small, before any work
    return open_stream(rng, lambda r: generate(r, n), source=f"{type}(n={n})", kind=type,
                       **stream)  # type: ignore[arg-type]


def sized_draw(type: str, size: float) -> Callable[[np.random.Generator], Dag]:
    """A DAG draw of mean task count ``size`` (a continuous workload scale, :func:`size_mix`).

    Workflow j draws from the j-th child of the DAG generator (``spawn`` counts children, whatever
    was drawn): a uniform u_j, then its DAG of size ``hi`` if u_j < p_hi, else ``lo``. So workflows
    never share a random stream, and raising ``size`` moves single workflows to the larger size while
    every other DAG stays as it was (common random numbers along the scale)."""
    mix = size_mix(type, size)
    generate = GENERATORS[type]

    def draw(r_dag: np.random.Generator) -> Dag:
        own = r_dag.spawn(1)[0]
        return generate(own, mix.hi if own.random() < mix.p_hi else mix.lo)

    return draw


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
