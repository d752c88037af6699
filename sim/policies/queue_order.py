"""Queue orders: the key that sorts waiting jobs (lower first). Ties always fall back to (submit, id).

The backfilling families take one for the queue (``order``) and, optionally, one for the order in
which backfill candidates are tried (``backfill_order``).
"""

from __future__ import annotations

from collections.abc import Callable

from sim.core import InputError, Job

QueueKey = Callable[[Job], tuple[float, ...]]

QUEUE_ORDERS: dict[str, QueueKey] = {
    "fcfs": lambda job: (job.submit, job.id),
    "sjf": lambda job: (job.time_limit, job.submit, job.id),
    "ljf": lambda job: (-job.time_limit, job.submit, job.id),
    "widest": lambda job: (-job.nodes, job.submit, job.id),
    "narrowest": lambda job: (job.nodes, job.submit, job.id),
}


def queue_key(name: object, what: str = "queue order") -> QueueKey:
    """The key named ``name``, or a one-line :class:`InputError` naming ``what`` it was for and the valid names.

    >>> queue_key("widest")(Job(0, 5.0, (8,), 60.0, 60.0))
    (-8, 5.0, 0)
    >>> queue_key("shortest", "backfill order")
    Traceback (most recent call last):
    sim.core.InputError: unknown backfill order 'shortest'; expected one of fcfs, sjf, ljf, widest, narrowest
    """
    if not isinstance(name, str) or name not in QUEUE_ORDERS:
        raise InputError(f"unknown {what} {name!r}; expected one of {', '.join(QUEUE_ORDERS)}")
    return QUEUE_ORDERS[name]


def backfill_key(backfill_order: object, order: str, refuse: str = "") -> QueueKey | None:
    """The key backfill candidates are tried in; None when it is the queue order (the default path).

    ``refuse`` (why this policy has no use for another order) turns another order into an InputError.
    """
    if backfill_order is None or backfill_order == order:
        return None
    key = queue_key(backfill_order, "backfill order")
    if refuse:
        raise InputError(f"{refuse}: backfill_order must be null or the queue order {order!r}, got {backfill_order!r}")
    return key
