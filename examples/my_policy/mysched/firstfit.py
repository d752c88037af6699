"""First fit, shortest first: every waiting job that fits starts now, shortest time limit first.

No reservation at all, so a wide job can wait as long as narrow ones keep arriving — the starvation
that EASY's one reservation exists to prevent. A dozen lines against the policy protocol
(``sim.policies.base``); the engine checks every start it returns.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.core import Job, Start
from sim.policies.base import BasePolicy
from sim.policies.queue_order import queue_key


class FirstFit(BasePolicy):
    """Start what fits, in ``order`` (any queue order: ``sjf`` shortest time limit first, ``fcfs`` …)."""

    def __init__(self, order: str = "sjf") -> None:
        self.key = queue_key(order)  # an unknown name is one line: "unknown queue order …"
        self.waiting: list[Job] = []

    def submit(self, job: Job, now: float) -> None:
        self.waiting.append(job)

    def schedule(self, now: float) -> Sequence[Start]:
        free, starts, left = int(self.view.free[0][0]), [], []
        for job in sorted(self.waiting, key=self.key):
            if job.nodes <= free:
                free -= job.nodes
                starts.append(Start(job))
            else:
                left.append(job)
        self.waiting = left
        return starts
