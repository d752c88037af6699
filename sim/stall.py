"""No progress: a policy whose wake-ups start nothing while jobs wait on an idle machine.

With nothing running and no arrival left, nothing the engine holds (queue, free capacity, arrivals,
completions) can change until the policy starts a job: only its wake-ups move the clock. A policy
may rightly wait for a time (a workflow's earliest start, a reservation made behind a job that
ended early), but one that wakes up forever and starts nothing would run forever; :class:`Stall`
tells the two apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sim.core import Job, Workflow

#: wake-ups in a row that start nothing on an idle machine before the clock is compared with the
#: stall's horizon; a policy waiting for a time wakes up then, once, or polls towards it
IDLE_WAKEUPS = 1_000
#: such wake-ups after which a run ends whatever the clock says (a policy stepping 1e-9 s would take
#: forever to reach a horizon); about half a second of engine time with a trivial policy
IDLE_WAKEUPS_MAX = 1_000_000


@dataclass(slots=True)
class Stall:
    """The passes on an idle machine with jobs waiting and no arrival left, since the last that
    changed something (``since``: the last arrival, completion or start; ``waiting``: the jobs then).

    Time may matter to a policy up to the **horizon**: the latest of ``since``, the planned end
    (start + time limit) of every job started in the run and the earliest start and deadline of every
    unfinished workflow, plus the longest time limit of the waiting jobs as slack. The run has stopped
    progressing once the policy has had :data:`IDLE_WAKEUPS` wake-ups that started nothing *and* the
    clock has passed the horizon, or :data:`IDLE_WAKEUPS_MAX` whatever the clock. So a policy that
    waits for a time by waking up then (every policy of ``sim.policies``) or polling towards it runs
    on, and one whose wake-ups change nothing ends within a fraction of a second.

    >>> stall = Stall(since=0.0, waiting=1)
    >>> job = Job(0, 0.0, (1,), 200.0, 200.0)
    >>> [t for t in range(1, 2000) if stall.stuck(float(t), 0.0, [job], [])][0], stall.horizon
    (1000, 200.0)
    """

    since: float
    waiting: int
    wakeups: int = 0
    horizon: float | None = None

    def stuck(self, now: float, latest_plan: float, waiting: Iterable[Job], workflows: Iterable[Workflow]) -> bool:
        """One more wake-up that started nothing, at ``now``: whether the run has stopped progressing.
        ``latest_plan``: the latest planned end of a job started so far; ``workflows``: the unfinished ones."""
        self.wakeups += 1
        if self.wakeups < IDLE_WAKEUPS:
            return False
        if self.horizon is None:
            times = [t for wf in workflows for t in (wf.earliest_start, wf.deadline)]
            self.horizon = max(self.since, latest_plan, *times) + max(job.time_limit for job in waiting)
        return now > self.horizon or self.wakeups >= IDLE_WAKEUPS_MAX

    def describe(self, now: float) -> str:
        """The one line ending the run."""
        waits = "1 job waits" if self.waiting == 1 else f"{self.waiting} jobs wait"
        return (f"no progress at t={now}: {waits} on an idle machine with no arrivals or completions left, "
                f"and the policy's {self.wakeups} wake-ups since t={self.since} started nothing")
