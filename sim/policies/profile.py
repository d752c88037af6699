"""Profile-based backfilling (Mu'alem & Feitelson 2001), the textbook EASY and CONSERVATIVE.

Free nodes over time are kept in an :class:`AvailabilityProfile`. Jobs are considered in queue
order; a job that fits *now* for its whole time limit starts; otherwise it receives a reservation
at its earliest fit, as long as fewer than ``depth`` jobs hold one (``depth=1``: Lifka's EASY —
shadow time plus extra nodes, a backfill may end exactly at the shadow time; ``depth=None``:
conservative backfilling, every queued job holds a reservation).

Conservative reservations persist between passes. A new job is placed *after* all existing
reservations (it never delays them). When a job ends earlier than planned the schedule is
compressed: the profile is rebuilt from the running jobs and every reservation is placed again at
its earliest fit, in order of its previous start time — each job's old slot is still free when its
turn comes, so no reservation ever moves later (Mu'alem & Feitelson's compression guarantee).

A job that runs past its time limit (no ``kill_at_limit``) is treated as ending *now* at every
pass: reservations that need its nodes start as soon as it really ends.

``backfill_order`` (a :data:`~sim.policies.queue_order.QUEUE_ORDERS` name; default: the queue
order): once ``depth`` jobs hold a reservation, the pass tries the remaining jobs in that order.
Conservative backfilling (``depth=None``) leaves no such jobs, so it refuses another order.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from sim.core import InputError, Job, Start
from sim.policies.base import BasePolicy, EngineView
from sim.policies.queue_order import backfill_key, queue_key


class AvailabilityProfile:
    """Free nodes as a step function: ``free[i]`` holds on ``[times[i], times[i+1])``.

    The last step extends to infinity.

    >>> p = AvailabilityProfile(0.0, 10)
    >>> p.reserve(0.0, 5.0, 6)
    >>> p.earliest(8, 3.0)
    5.0
    """

    __slots__ = ("free", "times")

    def __init__(self, now: float, total: int) -> None:
        self.times: list[float] = [now]
        self.free: list[int] = [total]

    def _split(self, t: float) -> int:
        """Index of the step starting exactly at ``t`` (created if needed; ``t`` ≥ first time)."""
        times = self.times
        i = bisect.bisect_left(times, t)
        if i < len(times) and times[i] == t:
            return i
        times.insert(i, t)
        self.free.insert(i, self.free[i - 1])
        return i

    def reserve(self, start: float, end: float, nodes: int) -> None:
        """Take ``nodes`` over ``[start, end)``."""
        if end <= start:
            return
        i = self._split(start)
        j = self._split(end)
        free = self.free
        for k in range(i, j):
            free[k] -= nodes

    def earliest(self, nodes: int, duration: float) -> float:
        """Earliest time from which ``nodes`` stay free for ``duration``."""
        times, free = self.times, self.free
        last = len(times)
        i = 0
        while True:
            while free[i] < nodes:
                i += 1
            start = times[i]
            end = start + duration
            j = i + 1
            while j < last and times[j] < end:
                if free[j] < nodes:
                    break
                j += 1
            else:
                return start
            i = j + 1

    def trim(self, now: float) -> None:
        """Forget the steps that ended before ``now``."""
        i = bisect.bisect_right(self.times, now) - 1
        if i > 0:
            del self.times[:i]
            del self.free[:i]
        self.times[0] = now


class ProfileBackfill(BasePolicy):
    """Textbook backfilling with ``depth`` reservations (1 = EASY, None = conservative).

    >>> ProfileBackfill(depth=None).name, ProfileBackfill(depth=1, backfill_order="sjf").name
    ('conservative_classic', 'easy_classic')
    """

    def __init__(self, depth: int | None = 1, order: str = "fcfs", backfill_order: str | None = None,
                 name: str | None = None) -> None:
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise InputError(f"depth must be null (every queued job holds a reservation) or an integer ≥ 0, "
                             f"got {depth!r}")
        self.name = name or {1: "easy_classic", None: "conservative_classic"}.get(depth, f"profile_depth{depth}")
        self.depth = depth
        self.order = order
        self.queue_key = queue_key(order)
        refuse = (f"{self.name} gives every queued job a reservation in queue order, leaving none to backfill "
                  f"(set order={backfill_order!r} to order the queue itself)") if depth is None else ""
        self.backfill_key = backfill_key(backfill_order, order, refuse)
        self._queued: dict[int, Job] = {}
        self._new: list[Job] = []
        self._reserved: dict[int, float] = {}
        #: the first start time each job was promised (its first reservation, or its start)
        self.promised: dict[int, float] = {}
        self._planned_end: dict[int, float] = {}
        self._profile = AvailabilityProfile(0.0, 0)
        self._rebuild = True
        self._total = 0

    def attach(self, view: EngineView) -> None:
        if len(view.cluster.resources) != 1 or len(view.cluster.machines) != 1:
            raise ValueError(f"{self.name} schedules node counts on one machine; got {view.cluster}")
        super().attach(view)
        self._total = view.cluster.node_count

    def submit(self, job: Job, now: float) -> None:
        self._new.append(job)

    def complete(self, job: Job, now: float) -> None:
        planned_end = self._planned_end.pop(job.id)
        if self.depth is not None or planned_end != now:
            self._rebuild = True

    def next_wakeup(self, now: float) -> float | None:
        return min((t for t in self._reserved.values() if t > now), default=None)

    def schedule(self, now: float) -> Sequence[Start]:
        new = sorted(self._new, key=self.queue_key)
        self._new = []
        earliest_reservation = min(self._reserved.values(), default=now + 1.0)
        if self._rebuild or earliest_reservation < now or (self.depth is not None and earliest_reservation == now):
            placing = self._rebuild_profile(now, new)
            started: list[Job] = []
        else:
            self._profile.trim(now)
            placing = new
            started = self._start_due(now)
        for job in new:
            self._queued[job.id] = job
        free = int(self.view.free[0][0]) - sum(job.nodes for job in started)
        profile = self._profile
        for job in placing if self.backfill_key is None else self._backfill_ordered(placing):
            t = profile.earliest(job.nodes, job.time_limit)
            if t == now and job.nodes <= free:
                profile.reserve(now, now + job.time_limit, job.nodes)
                free -= job.nodes
                started.append(job)
                self.promised.setdefault(job.id, now)
            elif self.depth is None or len(self._reserved) < self.depth:
                profile.reserve(t, t + job.time_limit, job.nodes)
                self._reserved[job.id] = t
                self.promised.setdefault(job.id, t)
        for job in started:
            del self._queued[job.id]
            self._planned_end[job.id] = now + job.time_limit
        self._rebuild = False
        return [Start(job) for job in started]

    def _backfill_ordered(self, placing: list[Job]) -> Iterator[Job]:
        """``placing`` in queue order while reservations are left, then the rest in backfill order."""
        assert self.depth is not None  # conservative_classic refuses a backfill order
        for i, job in enumerate(placing):
            if len(self._reserved) >= self.depth:
                yield from sorted(placing[i:], key=self.backfill_key)
                return
            yield job

    def _rebuild_profile(self, now: float, new: list[Job]) -> list[Job]:
        """Profile of the running jobs; returns every queued job, in placement order."""
        profile = AvailabilityProfile(now, self._total)
        for job, start, _ in self.view.running.values():
            profile.reserve(now, max(start + job.time_limit, now), job.nodes)
        self._profile = profile
        if self.depth is None:
            previous = self._reserved
            waiting = sorted(self._queued.values(), key=lambda j: (previous[j.id], self.queue_key(j)))
        else:
            waiting = sorted([*self._queued.values(), *new], key=self.queue_key)
            new = []
        self._reserved = {}
        return waiting + new

    def _start_due(self, now: float) -> list[Job]:
        """Reserved jobs whose time is now and that fit (their slot is already in the profile).

        A due job that does not fit waits for an overrunning job; its reservation then lies in the
        past, which makes the next pass rebuild the profile.
        """
        due = sorted((self.queue_key(self._queued[i]), i) for i, t in self._reserved.items() if t == now)
        free = int(self.view.free[0][0])
        started = []
        for _, job_id in due:
            job = self._queued[job_id]
            if job.nodes <= free:
                free -= job.nodes
                del self._reserved[job_id]
                started.append(job)
        return started

