"""The one protocol every scheduling policy implements.

The engine owns the truth (time, free capacity, what runs where); a policy keeps its own queue,
is told about submissions and completions, and *returns decisions* from :meth:`Policy.schedule`.
The engine validates and applies them — a policy never mutates engine state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sim.core import Cluster, Job, PolicyStats, Start, Workflow


@dataclass(slots=True)
class EngineView:
    """Read-only view of the engine state handed to a policy (do not mutate).

    ``free[m][r]`` is the free capacity of resource r on machine m right now; ``running`` maps a
    job id to ``(job, start_time, machine)``; ``workflows`` maps a workflow id to its
    :class:`~sim.core.Workflow` (release time, deadline, all its tasks) for workflow workloads.
    """

    cluster: Cluster
    free: list[list[float]]
    running: dict[int, tuple[Job, float, int]] = field(default_factory=dict)
    workflows: dict[int, Workflow] = field(default_factory=dict)


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

    def stats(self) -> PolicyStats:
        """The policy's own statistics after the run (remap counts, planning seconds …)."""
