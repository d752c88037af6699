"""FCFS, EASY and CONSERVATIVE backfilling exactly as the DR_EVT reference specifies them.

One routine, parameterised by the *window* a backfill candidate must finish before:

``none``  strict queue order, no backfilling (``fcfs``);
``head``  the shadow time of the queue head (``easy``: one reservation, ``end < shadow``,
          no extra-nodes allowance);
``ahead`` the earliest shadow time of every job ahead of the candidate (``conservative``).

A *shadow time* is computed from running jobs only (pessimistically, each ends at
``start + time_limit``): the first such end at which the free nodes plus the nodes freed so far
cover the request, or *now* if the job fits now. It depends only on the node count and the running
set, and grows with the node count — so the earliest shadow time among the jobs ahead of a
candidate is the shadow time of the *narrowest* of them. That turns the reference's O(n²) pass
into one scan that carries the running minimum width.

A pass after arrivals alone (no completion since the previous pass) re-examines only the queue
from the first new job on: earlier jobs were rejected with the same free nodes and shadow times at
an earlier instant, and a later instant only tightens ``now + time_limit < window``.

``backfill_order`` (a :data:`~sim.policies.queue_order.QUEUE_ORDERS` name; default: the queue
order) is the order in which backfill candidates are tried; the queue order still decides the head
and which jobs are *ahead* of a candidate. EASY tries them in one scan in that order against the
head's shadow time, which a backfill (it ends before that time) leaves where it was, so a rejected
candidate stays rejected. CONSERVATIVE refuses another order rather than ignore it: its schedule is
the same whatever the order, provably — a job waiting ahead that fits now has shadow time *now*, so a
candidate may start only if no job waiting ahead of it fits: of the jobs that fit, only the first in
queue order can ever start (``tests/test_backfill_order.py`` checks this on the literal rule).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal

from sim.core import InputError, Job, Start
from sim.policies.base import BasePolicy, EngineView
from sim.policies.queue_order import backfill_key, queue_key

Window = Literal["none", "head", "ahead"]
#: each window's policy name
WINDOWS: dict[str, str] = {"none": "fcfs", "head": "easy", "ahead": "conservative"}


class RunningEnds:
    """Running jobs as a sorted list of ``(planned_end, job_id, nodes)`` for shadow-time queries."""

    __slots__ = ("entries", "planned_end")

    def __init__(self) -> None:
        self.entries: list[tuple[float, int, int]] = []
        self.planned_end: dict[int, float] = {}

    def add(self, planned_end: float, job_id: int, nodes: int) -> None:
        bisect.insort(self.entries, (planned_end, job_id, nodes))
        self.planned_end[job_id] = planned_end

    def remove(self, job_id: int, nodes: int) -> None:
        entries = self.entries
        del entries[bisect.bisect_left(entries, (self.planned_end.pop(job_id), job_id, nodes))]

    def shadow(self, needed: int, free: int, now: float) -> float:
        """Earliest planned time at which ``needed`` nodes are free (``now`` if they are already)."""
        if needed <= free:
            return now
        available = free
        for end, _, nodes in self.entries:
            available += nodes
            if available >= needed:
                return end
        raise ValueError(f"{needed} nodes can never be free (machine too small)")


class SeedBackfill(BasePolicy):
    """The DR_EVT backfilling family (see module docstring): ``window`` none (``fcfs``), head
    (``easy``) or ahead (``conservative``), a queue ``order`` and a ``backfill_order``.

    >>> SeedBackfill("ahead", order="sjf").name
    'conservative'
    """

    def __init__(self, window: Window = "head", order: str = "fcfs", backfill_order: str | None = None,
                 name: str | None = None) -> None:
        if window not in WINDOWS:
            raise InputError(f"unknown window {window!r}; expected one of {', '.join(WINDOWS)}")
        self.name = name or WINDOWS[window]
        self.window = window
        self.order = order
        self.preserves_order = window == "none"
        self.queue_key = queue_key(order)
        refuse = {"none": f"{self.name} never backfills",
                  "ahead": f"{self.name} backfills the same jobs in any order (a candidate may start only when no "
                           f"job waiting ahead of it fits now), so a backfill order would change nothing"}
        self.backfill_key = backfill_key(backfill_order, order, refuse.get(window, ""))
        self._queue: list[Job] = []
        self._keys: list[tuple[float, ...]] = []
        self._widths: list[int] = []
        self._running = RunningEnds()
        self._rescan_from = 0

    def attach(self, view: EngineView) -> None:
        if len(view.cluster.resources) != 1 or len(view.cluster.machines) != 1:
            raise ValueError(f"{self.name} schedules node counts on one machine; got {view.cluster}")
        super().attach(view)

    def submit(self, job: Job, now: float) -> None:
        key = self.queue_key(job)
        position = bisect.bisect_right(self._keys, key)
        self._keys.insert(position, key)
        self._queue.insert(position, job)
        self._widths.insert(position, job.nodes)
        self._rescan_from = min(self._rescan_from, position)

    def complete(self, job: Job, now: float) -> None:
        self._running.remove(job.id, job.nodes)
        self._rescan_from = 0

    def schedule(self, now: float) -> Sequence[Start]:
        queue = self._queue
        rescan_from = self._rescan_from
        if not queue:
            return []
        free = int(self.view.free[0][0])
        running = self._running
        started: list[Job] = []
        positions: list[int] = []
        head = 0
        widths = self._widths
        while head < len(queue) and widths[head] <= free:
            job = queue[head]
            free -= widths[head]
            running.add(now + job.time_limit, job.id, widths[head])
            started.append(job)
            head += 1
        if head or rescan_from == 0:
            rescan_from = head + 1
        if self.window != "none" and head < len(queue):
            if self.backfill_key is None:
                self._backfill(now, free, head, max(rescan_from, head + 1), started, positions)
            else:
                self._backfill_ordered(now, free, head, started, positions)
        for position in reversed(positions):
            del queue[position]
            del self._keys[position]
            del self._widths[position]
        if head:
            del queue[:head]
            del self._keys[:head]
            del self._widths[:head]
        self._rescan_from = len(queue)
        return [Start(job) for job in started]

    def _backfill(
        self, now: float, free: int, head: int, scan_from: int, started: list[Job], positions: list[int]
    ) -> None:
        """Start every candidate from ``scan_from`` on that fits and ends before its window."""
        queue = self._queue
        running = self._running
        widths = self._widths
        ahead_nodes = widths[head]
        if self.window == "ahead":
            for nodes in widths[head + 1:scan_from]:
                ahead_nodes = min(ahead_nodes, nodes)
        cached_for = -1
        window = now
        for position in range(scan_from, len(queue)):
            if free == 0 or ahead_nodes <= free:
                break  # nothing fits, or a job ahead fits now: its shadow time is now
            nodes = widths[position]
            if nodes <= free:
                job = queue[position]
                if cached_for != ahead_nodes:
                    window = running.shadow(ahead_nodes, free, now)
                    cached_for = ahead_nodes
                if now + job.time_limit < window:
                    free -= nodes
                    running.add(now + job.time_limit, job.id, nodes)
                    started.append(job)
                    positions.append(position)
                    cached_for = -1
                    continue
            if self.window == "ahead" and nodes < ahead_nodes:
                ahead_nodes = nodes

    def _backfill_ordered(self, now: float, free: int, head: int, started: list[Job], positions: list[int]) -> None:
        """EASY with a backfill order: one scan of the candidates in that order (O(n log n))."""
        queue, widths, running = self._queue, self._widths, self._running
        key = self.backfill_key
        assert key is not None
        window = running.shadow(widths[head], free, now)
        for position in sorted(range(head + 1, len(queue)), key=lambda p: key(queue[p])):
            if free == 0:
                break
            job = queue[position]
            if widths[position] <= free and now + job.time_limit < window:
                free -= widths[position]
                running.add(now + job.time_limit, job.id, widths[position])
                started.append(job)
                positions.append(position)
        positions.sort()
