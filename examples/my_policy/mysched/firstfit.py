"""First fit, shortest first: every waiting job that fits starts now, shortest time limit first.

No reservation at all, so a wide job can wait as long as narrow ones keep arriving — the starvation
that EASY's one reservation exists to prevent. ``max_overtakes`` bounds it: a waiting job that later
arrivals have overtaken that many times blocks the queue behind it until it starts (no reservation, just
a stop). A few dozen lines against the policy protocol (``sim.policies.base``); the engine checks every
start it returns.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.core import Job, Start
from sim.policies.base import BasePolicy
from sim.policies.queue_order import queue_key


class FirstFit(BasePolicy):
    """Start what fits, in ``order`` (any queue order: ``sjf`` shortest time limit first, ``fcfs`` …);
    ``max_overtakes`` (``None``: unbounded) caps how often a waiting job may be overtaken by later arrivals."""

    def __init__(self, order: str = "sjf", max_overtakes: int | None = None) -> None:
        if max_overtakes is not None and (not isinstance(max_overtakes, int) or max_overtakes < 0):
            raise ValueError(f"max_overtakes must be a non-negative integer or null, got {max_overtakes!r}")
        self.key = queue_key(order)  # an unknown name is one line: "unknown queue order …"
        self.max_overtakes = max_overtakes
        self.waiting: list[Job] = []
        self.overtaken: dict[int, int] = {}

    def submit(self, job: Job, now: float) -> None:
        self.waiting.append(job)

    def schedule(self, now: float) -> Sequence[Start]:
        free, starts, left, blocked = int(self.view.free[0][0]), [], [], False
        for job in sorted(self.waiting, key=self.key):
            if not blocked and job.nodes <= free:
                free -= job.nodes
                starts.append(Start(job))
                self.overtaken.pop(job.id, None)
                continue
            left.append(job)
            blocked |= self.max_overtakes is not None and self.overtaken.get(job.id, 0) >= self.max_overtakes
        for job in left:  # each later arrival started now overtook it
            self.overtaken[job.id] = self.overtaken.get(job.id, 0) + sum(s.job.submit > job.submit for s in starts)
        self.waiting = left
        return starts
