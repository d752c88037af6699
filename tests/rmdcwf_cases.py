"""Hand-built workflow streams for the RM-DCWF tests (independent of the workload generators)."""

from __future__ import annotations

from collections.abc import Sequence

from sim.core import Cluster, Job, SimulationResult, Workflow
from sim.engine import simulate
from sim.policies import policy_from_conf

#: a task: (execution time, parents as local indices)
Task = tuple[float, Sequence[int]]


def workflow(wf_id: int, tasks: Sequence[Task], deadline: float, arrival: float = 0.0,
             start: float | None = None) -> Workflow:
    """Workflow ``wf_id`` whose task i has global id ``100 · wf_id + i``."""
    base = 100 * wf_id
    jobs = tuple(Job(base + i, arrival, (1,), float(e), float(e), workflow=wf_id, parents=tuple(base + p for p in ps))
                 for i, (e, ps) in enumerate(tasks))
    return Workflow(wf_id, arrival, arrival if start is None else start, deadline, jobs,
                    work=sum(float(e) for e, _ in tasks))


def simulate_workflows(workflows: Sequence[Workflow], m: int, c: int, policy: str = "rmdcwf",
                       **options: object) -> SimulationResult:
    """Run ``policy`` on the workflows on an m × c slotted cluster (invariant checks on in tests)."""
    jobs = [t for wf in workflows for t in wf.tasks]
    return simulate(jobs, Cluster.slotted(m, c), policy_from_conf(policy, **options), workflows=workflows)


def starts(result: SimulationResult) -> dict[int, tuple[float, int]]:
    """Task id → (start, resource)."""
    return {r.job.id: (r.start, r.machine) for r in result.records}
