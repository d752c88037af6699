"""Core value types shared by the engine, the policies and the workloads.

One job model covers every workload on the roadmap:

* a rigid HPC job is a :class:`Job` whose ``demand`` is ``(nodes,)`` on a cluster with one
  resource (``nodes``) and one machine;
* a multi-resource task (DRF) has a demand vector over named resources (``cpu``, ``mem`` …) and a
  ``user``; the cluster is one pooled machine or several machines it must fit on;
* a workflow task (RM-DCWF) has ``workflow`` set and ``parents`` naming the tasks that must finish
  before it may start; resources are machines with ``c_r`` slots.

All times are in seconds (floats); all quantities are numbers in the cluster's resource units.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


class InputError(ValueError):
    """Bad user input: the message names the file, line, field and what was expected."""


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of work the engine schedules.

    ``time_limit`` is what the user asked for (planning uses ``start + time_limit``);
    ``runtime`` is how long the job really occupies its resources.
    """

    id: int
    submit: float
    demand: tuple[float, ...]
    time_limit: float
    runtime: float
    user: str = ""
    workflow: int = -1
    parents: tuple[int, ...] = ()

    @property
    def nodes(self) -> int:
        """Node count of a rigid job (the first demand component)."""
        return int(self.demand[0])


def rigid_job(job_id: int, submit: float, nodes: int, time_limit: float, runtime: float | None = None) -> Job:
    """A single-resource node-count job; ``runtime`` defaults to the time limit.

    >>> rigid_job(3, 10.0, 4, 100.0, 60.0).nodes
    4
    """
    return Job(job_id, float(submit), (nodes,), float(time_limit),
               float(time_limit if runtime is None else runtime))


@dataclass(frozen=True, slots=True)
class Cluster:
    """Named resources and the machines that hold them.

    ``machines[m][r]`` is machine m's capacity of resource ``resources[r]``. A job must fit on a
    single machine; a pooled cluster (the classic HPC node count, the DRF paper's model) is one
    machine.
    """

    resources: tuple[str, ...]
    machines: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        if not self.resources or not self.machines:
            raise InputError("a cluster needs at least one resource and one machine")
        for capacity in self.machines:
            if len(capacity) != len(self.resources):
                raise InputError(f"machine capacity {capacity} does not match resources {self.resources}")
            if any(c <= 0 for c in capacity):
                raise InputError(f"machine capacity {capacity} must be positive")

    @classmethod
    def nodes(cls, count: int) -> Cluster:
        """A homogeneous machine of ``count`` interchangeable nodes."""
        if count <= 0:
            raise InputError(f"the machine needs a positive node count, got {count}")
        return cls(("nodes",), ((count,),))

    @classmethod
    def slotted(cls, machines: int, slots: int) -> Cluster:
        """``machines`` identical resources with ``slots`` concurrent tasks each (RM-DCWF's m × c_r)."""
        return cls(("slots",), tuple((slots,) for _ in range(machines)))

    def slotted_shape(self, who: str) -> tuple[int, int]:
        """``(m, c_r)`` of a :meth:`slotted` cluster; an :class:`InputError` naming ``who`` for any other."""
        caps = sorted(set(self.machines))
        if self.resources != ("slots",) or len(caps) != 1 or not float(caps[0][0]).is_integer():
            raise InputError(f"{who} needs a slotted cluster (m identical resources of c_r slots each: "
                             f"cluster=rmdcwf), got resources {self.resources} with capacities {caps}")
        return len(self.machines), int(caps[0][0])

    @property
    def total(self) -> tuple[float, ...]:
        """Capacity summed over machines, per resource."""
        return tuple(sum(col) for col in zip(*self.machines, strict=True))

    @property
    def node_count(self) -> int:
        """Total size of a single-resource cluster."""
        return int(self.total[0])

    def fits_anywhere(self, demand: tuple[float, ...]) -> bool:
        """Whether some machine could ever hold ``demand``."""
        return any(all(d <= c for d, c in zip(demand, cap, strict=True)) for cap in self.machines)


@dataclass(frozen=True, slots=True)
class Start:
    """A policy's decision: start ``job`` now on ``machine``."""

    job: Job
    machine: int = 0


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job."""

    job: Job
    start: float
    end: float
    machine: int = 0

    @property
    def wait(self) -> float:
        return self.start - self.job.submit


@dataclass(frozen=True, slots=True)
class Workflow:
    """A deadline-constrained job of RM-DCWF: a DAG of tasks with a release time and a deadline.

    ``tasks`` are :class:`Job` s (``workflow`` = this id, ``submit`` = ``arrival``, one slot each,
    ``parents`` naming task ids of this workflow); no task may start before ``earliest_start``
    (s_j); the workflow is late when its last task ends after ``deadline`` (d_j). ``set_r`` (SET^R,
    the list-scheduled length alone on the run's cluster), ``work`` (sum of task run times) and
    ``critical_path`` are what the generator knew when it drew the deadline; ``alone_finish`` are the
    task completions of that SET^R schedule on an ``alone_shape`` (machines, slots) system (empty when
    not computed), which RM-DCWF's SL budgeting reuses on a cluster of that shape.
    """

    id: int
    arrival: float
    earliest_start: float
    deadline: float
    tasks: tuple[Job, ...]
    set_r: float = 0.0
    work: float = 0.0
    critical_path: float = 0.0
    kind: str = ""
    alone_finish: tuple[float, ...] = ()
    alone_shape: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class PolicyStats:
    """What a policy reports about itself: flat counters merged into the run's metrics
    (``remap/attempts`` …; ``Policy.stats`` after the run), and for a workflow as its last task ends
    (``Policy.workflow_done``) the wall-clock seconds it spent planning it (RM-DCWF's overhead O)
    and per-task values it decided (``sub_deadline``), keyed by task id. Empty for policies that have
    nothing to say."""

    counters: dict[str, float] = field(default_factory=dict)
    seconds_by_job: dict[int, float] = field(default_factory=dict)
    task_values: dict[str, dict[int, float]] = field(default_factory=dict)


@dataclass(slots=True)
class Workload:
    """Jobs plus what reading them taught us (counts of repaired or dropped values).

    ``kind`` picks the metric set a run reports (see :mod:`sim.run`): ``hpc`` (rigid jobs),
    ``multires`` (users' tasks with demand vectors) or ``workflow`` (deadline-constrained DAGs).
    A workflow workload has no ``jobs``: its tasks are those of ``workflows``, in (arrival, id)
    order, which a run iterates once — a generated stream builds each workflow only then
    (:class:`sim.workflows.stream.OpenStream`).
    """

    jobs: list[Job] = field(default_factory=list)
    source: str = ""
    default_nodes: int | None = None
    notes: dict[str, int] = field(default_factory=dict)
    kind: str = "hpc"
    workflows: Iterable[Workflow] = ()
    #: leading workflows (by arrival) left out of the metrics: the system starts empty
    warmup: int = 0
    #: job id → line of ``source`` it was read from (trace readers), so errors found later can point there
    lines: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """The schedule (one record per job, in input order) and how it was produced."""

    records: list[JobRecord]
    cluster: Cluster
    policy: str
    passes: int
    stats: PolicyStats = field(default_factory=PolicyStats)
    workflows: tuple[Workflow, ...] = ()
