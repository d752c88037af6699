"""Queue orders: the key that sorts waiting jobs (lower first). Ties always fall back to (submit, id)."""

from __future__ import annotations

from collections.abc import Callable

from sim.core import Job

QueueKey = Callable[[Job], tuple[float, ...]]

QUEUE_ORDERS: dict[str, QueueKey] = {
    "fcfs": lambda job: (job.submit, job.id),
    "sjf": lambda job: (job.time_limit, job.submit, job.id),
    "ljf": lambda job: (-job.time_limit, job.submit, job.id),
}
