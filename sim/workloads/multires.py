"""Multi-resource workloads: users (frameworks) with weights submitting tasks with demand vectors.

A task is a :class:`~sim.core.Job` with ``user`` set, ``demand`` over the cluster's named
resources and ``time_limit = runtime =`` its duration. Both sources return a
:class:`MultiResWorkload` — a :class:`~sim.core.Workload` that also carries the resource names and
the users' weights (for ``drf_weighted`` and the fairness metrics).

**Generator** (:func:`multires_workload`): per user (a :class:`UserSpec`, or a mapping of its
fields) ``tasks`` tasks arriving from ``start`` on as a Poisson process of ``rate`` tasks/s (all
at ``start`` when ``rate`` is 0); each demand component uniform in ``demand × [1 − spread,
1 + spread]``, rounded up to a multiple of ``quantum`` when ``quantum > 0``; durations exponential
with mean ``duration`` (or all equal with ``duration_dist="fixed"``). Each user draws from its own
child of ``rng`` (users in name order), so the tasks of one user do not change when another
user's spec does: common random numbers across policies *and* across user mixes. Task ids follow
submit order (ties: user name, then the user's own order).

**CSV** (:func:`read_multires_csv`): header ``user,submit_time,duration,<resource columns>``
(columns in any order; every other column is a resource, and when ``resources`` or a cluster is
given the resource columns must be exactly those). Blank lines are skipped; a bad cell is an
error naming file, line and column; a task with an all-zero demand, or (when a cluster is given)
one that fits no machine, is an error naming the task. Task id = 0-based row index.
:func:`write_multires_csv` writes a file that reads back into equal tasks.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

import numpy as np

from sim.core import Cluster, InputError, Job, Workload
from sim.workloads.errors import parse_number, read_lines

REQUIRED = ("user", "submit_time", "duration")


@dataclass(slots=True)
class MultiResWorkload(Workload):
    """Tasks plus the resource names their demands refer to and the users' weights (default 1)."""

    resources: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)
    kind: str = "multires"


@dataclass(frozen=True, slots=True)
class UserSpec:
    """One user of the synthetic generator (see the module docstring); ``demand`` is a vector in
    resource order or a mapping resource → amount."""

    demand: tuple[float, ...] | Mapping[str, float]
    tasks: int
    duration: float
    rate: float = 0.0
    start: float = 0.0
    weight: float = 1.0
    spread: float = 0.0
    quantum: float = 0.0
    duration_dist: Literal["exponential", "fixed"] = "exponential"


def multires_cluster(capacity: Mapping[str, float], machines: int = 1) -> Cluster:
    """``machines`` identical machines with ``capacity`` each (one machine = a pooled cluster).

    >>> multires_cluster({"cpu": 9, "mem": 18})
    Cluster(resources=('cpu', 'mem'), machines=((9, 18),))
    """
    if isinstance(machines, bool) or not isinstance(machines, int) or machines < 1:
        raise InputError(f"multires_cluster: machines must be a positive integer, got {machines!r}")
    return Cluster(tuple(capacity), tuple(tuple(capacity.values()) for _ in range(machines)))


def multires_workload(rng: np.random.Generator, *, users: Mapping[str, UserSpec | Mapping[str, object]],
                      resources: Sequence[str] | None = None, cluster: Cluster | None = None) -> MultiResWorkload:
    """Synthetic tasks of ``users`` over ``resources`` (default: the cluster's).

    With ``cluster`` every task must fit on some machine.

    >>> w = multires_workload(np.random.default_rng(0), resources=("cpu", "mem"),
    ...                       users={"A": {"demand": (1, 4), "tasks": 2, "duration": 10, "weight": 2}})
    >>> [(j.user, j.demand) for j in w.jobs], w.weights
    ([('A', (1.0, 4.0)), ('A', (1.0, 4.0))], {'A': 2.0})
    """
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"multires_workload: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    names = _resources(resources, cluster)
    if not users:
        raise InputError("multires_workload: no users")
    specs = {u: _spec(u, s, names) for u, s in sorted(users.items())}
    rows: list[tuple[float, str, int, tuple[float, ...], float]] = []
    for (user, spec), child in zip(specs.items(), rng.spawn(len(specs)), strict=True):
        rows += [(t, user, k, d, r) for k, (t, d, r) in enumerate(_draw(spec, child))]
    rows.sort(key=lambda row: row[:3])
    jobs = [Job(i, t, d, r, r, user) for i, (t, user, _, d, r) in enumerate(rows)]
    if cluster is not None:
        for job in jobs:
            _check_fits(job, cluster, "multires_workload")
    source = f"multires_workload(users={','.join(specs)}, tasks={len(jobs)})"
    return MultiResWorkload(jobs, source=source, resources=names,
                            weights={u: s.weight for u, s in specs.items()})


def _resources(resources: Sequence[str] | None, cluster: Cluster | None) -> tuple[str, ...]:
    if resources is None:
        if cluster is None:
            raise InputError("multires_workload: give resources or a cluster")
        return cluster.resources
    names = tuple(resources)
    if cluster is not None and names != cluster.resources:
        raise InputError(f"multires_workload: resources {names} differ from the cluster's {cluster.resources}")
    if not names or len(set(names)) != len(names):
        raise InputError(f"multires_workload: resources must be distinct names, got {names}")
    return names


def _spec(user: str, spec: UserSpec | Mapping[str, object], resources: tuple[str, ...]) -> UserSpec:
    """``spec`` as a validated :class:`UserSpec` whose demand is a tuple in ``resources`` order."""
    where = f"multires_workload: user {user!r}"
    if not isinstance(spec, UserSpec):
        known = {f.name for f in fields(UserSpec)}
        unknown = set(spec) - known
        if unknown:
            raise InputError(f"{where}: unknown field {sorted(unknown)[0]!r}; expected {', '.join(sorted(known))}")
        try:
            spec = UserSpec(**spec)  # type: ignore[arg-type]
        except TypeError as err:
            raise InputError(f"{where}: {err}") from None
    demand = spec.demand
    if isinstance(demand, Mapping):
        if set(demand) != set(resources):
            raise InputError(f"{where}: demand names {sorted(demand)}, expected exactly {list(resources)}")
        demand = tuple(demand[r] for r in resources)
    demand = tuple(float(d) for d in demand)
    if len(demand) != len(resources) or not all(math.isfinite(d) and d >= 0 for d in demand) or not any(demand):
        raise InputError(f"{where}: demand {spec.demand} must be {len(resources)} non-negative numbers "
                         f"({', '.join(resources)}), not all zero")
    checks = (("tasks", spec.tasks, isinstance(spec.tasks, int) and not isinstance(spec.tasks, bool)
               and spec.tasks >= 1, "a positive integer"),
              ("duration", spec.duration, _finite(spec.duration) and spec.duration > 0, "a number > 0"),
              ("rate", spec.rate, _finite(spec.rate) and spec.rate >= 0, "a number ≥ 0 (tasks/s; 0: all at start)"),
              ("start", spec.start, _finite(spec.start) and spec.start >= 0, "a number ≥ 0"),
              ("weight", spec.weight, _finite(spec.weight) and spec.weight > 0, "a number > 0"),
              ("spread", spec.spread, _finite(spec.spread) and 0 <= spec.spread < 1, "a number in [0, 1)"),
              ("quantum", spec.quantum, _finite(spec.quantum) and spec.quantum >= 0, "a number ≥ 0"),
              ("duration_dist", spec.duration_dist, spec.duration_dist in ("exponential", "fixed"),
               "'exponential' or 'fixed'"))
    for name, value, ok, expected in checks:
        if not ok:
            raise InputError(f"{where}: {name} must be {expected}, got {value!r}")
    return UserSpec(demand, spec.tasks, float(spec.duration), float(spec.rate), float(spec.start),
                    float(spec.weight), float(spec.spread), float(spec.quantum), spec.duration_dist)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _draw(spec: UserSpec, rng: np.random.Generator) -> list[tuple[float, tuple[float, ...], float]]:
    """``(submit, demand, duration)`` of each task of one user, in a fixed draw order."""
    n = spec.tasks
    submit = spec.start + (np.cumsum(rng.exponential(1 / spec.rate, n)) if spec.rate > 0 else np.zeros(n))
    base = np.array(spec.demand)
    demand = base * rng.uniform(1 - spec.spread, 1 + spec.spread, (n, base.size))
    if spec.quantum > 0:
        demand = np.where(base > 0, np.maximum(np.ceil(demand / spec.quantum - 1e-9), 1) * spec.quantum, 0.0)
    durations = np.full(n, spec.duration) if spec.duration_dist == "fixed" else rng.exponential(spec.duration, n)
    return [(float(submit[k]), tuple(float(d) for d in demand[k]), float(durations[k])) for k in range(n)]


def _check_fits(job: Job, cluster: Cluster, where: str) -> None:
    if not cluster.fits_anywhere(job.demand):
        shown = ", ".join(f"{r}={d:g}" for r, d in zip(cluster.resources, job.demand, strict=True))
        capacity = cluster.machines[0] if len(cluster.machines) == 1 else cluster.machines
        raise InputError(f"{where}: task {job.id} (user {job.user!r}): demand {shown} exceeds every machine "
                         f"(capacity {capacity} of {', '.join(cluster.resources)})")


def read_multires_csv(path: str | Path, *, resources: Sequence[str] | None = None, cluster: Cluster | None = None,
                      weights: Mapping[str, float] | None = None) -> MultiResWorkload:
    """Read a multi-resource task CSV (see the module docstring for the rules)."""
    return parse_multires_csv(read_lines(path), str(path), resources=resources, cluster=cluster, weights=weights)


def parse_multires_csv(text: str | Iterable[str], name: str, *, resources: Sequence[str] | None = None,
                       cluster: Cluster | None = None, weights: Mapping[str, float] | None = None) -> MultiResWorkload:
    """Parse CSV ``text`` (a string or its lines with their ends); ``name`` (the file) prefixes error messages.

    >>> w = parse_multires_csv("user,submit_time,duration,cpu,mem\\nA,0,10,1,4\\n", "t.csv")
    >>> w.jobs[0].demand, w.resources
    ((1.0, 4.0), ('cpu', 'mem'))
    """
    reader = csv.reader(io.StringIO(text, newline="") if isinstance(text, str) else text)
    header = next((row for row in reader if any(cell.strip() for cell in row)), None)
    if header is None:
        raise InputError(f"{name}: empty file: expected a header {','.join(REQUIRED)},<resource columns>")
    header = [cell.strip() for cell in header]
    names = _csv_resources(header, f"{name}:{reader.line_num}", resources, cluster)
    jobs: list[tuple[int, Job]] = []
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            continue
        where = f"{name}:{reader.line_num}"
        if len(cells) != len(header):
            raise InputError(f"{where}: expected {len(header)} comma-separated cells as in the header, "
                             f"got {len(cells)}")
        row = dict(zip(header, (cell.strip() for cell in cells), strict=True))
        if not row["user"]:
            raise InputError(f"{where}: column 'user': expected a user name, got ''")
        submit = parse_number(row["submit_time"], where, "column 'submit_time'")
        duration = parse_number(row["duration"], where, "column 'duration'")
        if duration <= 0:
            raise InputError(f"{where}: column 'duration': expected a number > 0, got {row['duration']!r}")
        demand = tuple(parse_number(row[r], where, f"column {r!r}") for r in names)
        task = len(jobs)
        if not any(demand):
            raise InputError(f"{where}: task {task} (user {row['user']!r}): demand is zero on every resource")
        jobs.append((reader.line_num, Job(task, submit, demand, duration, duration, row["user"])))
    if not jobs:
        raise InputError(f"{name}: no tasks: the file has a header but no task rows")
    if cluster is not None:
        for line, job in jobs:
            _check_fits(job, cluster, f"{name}:{line}")
    users = {job.user for _, job in jobs}
    weights = dict(weights or {})
    unknown = sorted(set(weights) - users)
    if unknown:
        raise InputError(f"{name}: weights for users not in the file: {', '.join(unknown)}")
    bad = [u for u, w in weights.items() if not (_finite(w) and w > 0)]
    if bad:
        raise InputError(f"{name}: user {bad[0]!r}: weight must be a number > 0, got {weights[bad[0]]!r}")
    return MultiResWorkload([job for _, job in jobs], source=name, resources=names,
                            weights={u: float(weights.get(u, 1.0)) for u in sorted(users)})


def _csv_resources(header: list[str], where: str, resources: Sequence[str] | None,
                   cluster: Cluster | None) -> tuple[str, ...]:
    """The resource columns of ``header``, checked against the expected resources if any."""
    expected = f"{','.join(REQUIRED)},<resource columns>"
    missing = [column for column in REQUIRED if column not in header]
    if missing:
        raise InputError(f"{where}: missing column {missing[0]!r}: expected {expected}; found {','.join(header)}")
    if len(set(header)) != len(header):
        raise InputError(f"{where}: duplicate column names in header {','.join(header)}")
    found = tuple(column for column in header if column not in REQUIRED)
    wanted = tuple(resources) if resources is not None else cluster.resources if cluster is not None else None
    if cluster is not None and wanted != cluster.resources:
        raise InputError(f"{where}: resources {wanted} differ from the cluster's {cluster.resources}")
    if wanted is None:
        if not found:
            raise InputError(f"{where}: no resource columns: expected {expected}")
        return found
    for column in wanted:
        if column not in found:
            raise InputError(f"{where}: missing resource column {column!r}: expected {', '.join(wanted)}")
    for column in found:
        if column not in wanted:
            raise InputError(f"{where}: unknown column {column!r}: the resources are {', '.join(wanted)}")
    return wanted


def write_multires_csv(workload: MultiResWorkload, path: str | Path) -> None:
    """Write ``workload`` so that :func:`read_multires_csv` reads back equal tasks."""
    with open(path, "w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream, lineterminator="\n")
        out.writerow([*REQUIRED, *workload.resources])
        for job in sorted(workload.jobs, key=lambda j: j.id):
            out.writerow([job.user, repr(job.submit), repr(job.runtime), *(repr(float(d)) for d in job.demand)])
