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
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal

from sim.core import Job, PolicyStats, Start
from sim.policies.base import JOB_KINDS, EngineView
from sim.policies.queue_order import QUEUE_ORDERS

Window = Literal["none", "head", "ahead"]


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


class SeedBackfill:
    """The DR_EVT backfilling family (see module docstring) with a configurable queue order."""

    workload_kinds = JOB_KINDS

    def __init__(self, name: str, window: Window, order: str = "fcfs") -> None:
        self.name = name
        self.window = window
        self.order = order
        self.preserves_order = window == "none"
        self.queue_key = QUEUE_ORDERS[order]
        self._queue: list[Job] = []
        self._keys: list[tuple[float, ...]] = []
        self._widths: list[int] = []
        self._running = RunningEnds()
        self._rescan_from = 0
        self._view: EngineView | None = None

    def attach(self, view: EngineView) -> None:
        if len(view.cluster.resources) != 1 or len(view.cluster.machines) != 1:
            raise ValueError(f"{self.name} schedules node counts on one machine; got {view.cluster}")
        self._view = view

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

    def next_wakeup(self, now: float) -> float | None:
        return None

    def stats(self) -> PolicyStats:
        return PolicyStats()

    def schedule(self, now: float) -> Sequence[Start]:
        queue = self._queue
        rescan_from = self._rescan_from
        if not queue:
            return []
        free = int(self._view.free[0][0])
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
            self._backfill(now, free, head, max(rescan_from, head + 1), started, positions)
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
