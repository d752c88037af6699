"""The one protocol every scheduling policy implements, and :class:`BasePolicy` with its defaults.

The engine owns the truth (time, free capacity, what runs where); a policy keeps its own queue,
is told about submissions and completions, and *returns decisions* from :meth:`Policy.schedule`.
The engine validates and applies them — a policy never mutates engine state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sim.core import Cluster, Job, PolicyStats, Start, Workflow


@dataclass(slots=True)
class EngineView:
    """Read-only view of the engine state handed to a policy (do not mutate).

    ``free[m][r]`` is the free capacity of resource r on machine m right now; ``running`` maps a
    job id to ``(job, start_time, machine)``; ``workflows`` maps the id of each workflow that has
    arrived and not finished to its :class:`~sim.core.Workflow` (release time, deadline, all its tasks).
    """

    cluster: Cluster
    free: list[list[float]]
    running: dict[int, tuple[Job, float, int]] = field(default_factory=dict)
    workflows: dict[int, Workflow] = field(default_factory=dict)


@dataclass(slots=True)
class WorkflowArrivals:
    """Workflow bookkeeping shared by the workflow planners (rmdcwf, mrcp): the engine submits
    tasks one by one; a planner plans whole workflows. The first task of a workflow to arrive puts
    the workflow in ``arrived`` (to plan at the next pass); ``left`` counts its unfinished tasks."""

    policy: str
    arrived: dict[int, Workflow] = field(default_factory=dict)
    left: dict[int, int] = field(default_factory=dict)  # workflow id → tasks not yet completed

    def submit(self, view: EngineView | None, job: Job) -> None:
        """A task arrived: its workflow joins ``arrived`` the first time one of its tasks does."""
        assert view is not None, "attach() first"
        wf = view.workflows.get(job.workflow)
        if wf is None:
            raise ValueError(f"{self.policy}: job {job.id} belongs to no workflow of this workload")
        if wf.id not in self.left:
            self.arrived[wf.id] = wf
            self.left[wf.id] = len(wf.tasks)

    def complete(self, job: Job) -> bool:
        """A task ended; True when it was its workflow's last."""
        self.left[job.workflow] -= 1
        if self.left[job.workflow]:
            return False
        del self.left[job.workflow]
        return True

    def take(self) -> list[Workflow]:
        """The workflows that arrived since the last call, in (arrival, id) order, to plan now."""
        out = sorted(self.arrived.values(), key=lambda w: (w.arrival, w.id))
        self.arrived.clear()
        return out


#: what the job-queue policies (backfilling, fair share) schedule
JOB_KINDS = frozenset({"hpc", "multires"})


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy.

    Same-instant contract (engine side): all completions at an instant are reported first, then
    all arrivals in (submit time, job id) order, then :meth:`schedule` runs once.
    """

    name: str
    #: True when jobs must start in queue order (the invariant checker verifies it).
    preserves_order: bool
    #: the workload kinds (``Workload.kind``) the policy can schedule: a mismatch is refused up front
    workload_kinds: frozenset[str]

    def attach(self, view: EngineView) -> None:
        """Called once before the simulation with the engine's live view."""

    def submit(self, job: Job, now: float) -> None:
        """A job arrived."""

    def complete(self, job: Job, now: float) -> None:
        """A running job ended."""

    def schedule(self, now: float) -> Sequence[Start]:
        """One scheduling pass: the jobs to start now."""

    def next_wakeup(self, now: float) -> float | None:
        """A future time at which the policy wants a pass even if nothing else happens."""

    def workflow_done(self, workflow: int) -> PolicyStats:
        """A workflow's last task ended (after :meth:`complete`): what the policy kept for it (its
        planning seconds, its tasks' values), which it then forgets."""

    def stats(self) -> PolicyStats:
        """The policy's own counters after the run (remap counts …)."""


class BasePolicy(ABC):
    """The :class:`Policy` protocol's defaults; a policy overrides :meth:`submit` and :meth:`schedule`.

    The protocol: :meth:`attach` once with the engine's live :class:`EngineView` (kept as
    ``self.view``); then at every instant :meth:`complete` for each job that ended, :meth:`submit`
    for each arrival, and one :meth:`schedule` returning the :class:`~sim.core.Start` decisions;
    :meth:`next_wakeup` asks for a pass at a later time; :meth:`workflow_done` hands over what the
    policy kept for a finished workflow; :meth:`stats` reports the policy's own counters after the
    run. The engine refuses (``SchedulingError``) a job started twice, before its submission, its
    workflow's earliest start or its parents' end, on a machine that does not exist or where it does
    not fit, a wake-up not after now, wake-ups that start nothing while jobs wait on an idle machine
    (:mod:`sim.stall`), and jobs left never started.

    Defaults: ``name`` the class name, ``preserves_order`` False (True makes the invariant checker
    verify starts against ``self.queue_key``), ``workload_kinds`` the job-queue kinds (hpc, multires).

    >>> class Idle(BasePolicy):
    ...     def submit(self, job: Job, now: float) -> None: ...
    ...     def schedule(self, now: float) -> Sequence[Start]: return []
    >>> Idle().name, Idle().next_wakeup(0.0)
    ('Idle', None)
    """

    name: str = "BasePolicy"
    preserves_order: bool = False
    workload_kinds: frozenset[str] = JOB_KINDS
    view: EngineView | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    def attach(self, view: EngineView) -> None:
        """Keep the engine's live view as ``self.view``."""
        self.view = view

    @abstractmethod
    def submit(self, job: Job, now: float) -> None:
        """A job arrived."""

    def complete(self, job: Job, now: float) -> None:  # noqa: B027 (a no-op default, not abstract)
        """A running job ended (nothing to do by default)."""

    @abstractmethod
    def schedule(self, now: float) -> Sequence[Start]:
        """One scheduling pass: the jobs to start now."""

    def next_wakeup(self, now: float) -> float | None:
        """No wake-up: passes happen at arrivals and completions only."""
        return None

    def workflow_done(self, workflow: int) -> PolicyStats:
        """Nothing kept per workflow."""
        return PolicyStats()

    def stats(self) -> PolicyStats:
        """No statistics of its own."""
        return PolicyStats()
