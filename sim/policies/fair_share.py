"""Online multi-resource policies: DRF, weighted DRF and the baselines the DRF paper argues against.

Each user (``Job.user``) has a FIFO queue of tasks. At every scheduling pass :class:`FairShare`
runs progressive filling on the live cluster: it grants the head task of the user with the lowest
``(share / weight, user)`` whose head task fits, updates that user's share, and repeats until no
head task fits. What "share" means is the rule (:mod:`sim.fairness.shares`):

* ``drf`` / ``drf_weighted`` — dominant share ``max_r x_r / C_r`` (``C`` the cluster total);
* ``cpu_fair`` — the share of one resource (the first, or the one named by ``resource``);
* ``asset_fair`` — the sum of shares.

A user whose head task does not fit is skipped for the rest of the pass (capacity only shrinks
within a pass) and is eligible again once something completes. With ``strict=True`` it is not
skipped but blocks everyone after it in share order until its task fits (the DRF paper's
Algorithm 1, which stops at the first task that does not fit): fairer when big tasks compete
with small ones — a skipped user with big tasks can wait while smaller tasks of users with
higher shares take every freed slot — at some cost in utilisation. Candidates wait in a heap keyed by
``(share / weight, user)``, so a pass costs O((grants + candidates) · log users) rather than a scan
of all users per grant, and a pass triggered only by arrivals looks at nothing but the users
whose head task is new.

:class:`FcfsMulti` (``fcfs_multi``) starts tasks strictly in arrival order and blocks at the head.

Where a task goes is the placement rule: ``first_fit`` (the lowest-numbered machine it fits on) or
``best_fit`` (the machine it leaves with the least free capacity, summed over resources as
fractions of that machine's capacity; ties to the lowest number). A pooled cluster has one machine.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from sim.core import InputError, Job, Start
from sim.fairness.shares import RULES, Rule, rule_share
from sim.policies.base import BasePolicy, EngineView
from sim.policies.queue_order import QUEUE_ORDERS

Placement = Literal["best_fit", "first_fit"]
PLACEMENTS: tuple[Placement, ...] = ("best_fit", "first_fit")
#: From this many machines on, placement works on numpy arrays.
VECTOR_MACHINES = 8
Free = list[list[float]] | np.ndarray


class _MultiResource(BasePolicy):
    """Shared plumbing: the engine view and the placement rule.

    On clusters of :data:`VECTOR_MACHINES` machines or more, free capacity is a numpy array so a
    placement is a few vector operations instead of a Python loop over machines (same decisions:
    the same float operations in the same order, ties to the lowest machine number).
    """

    def __init__(self, placement: Placement = "best_fit", name: str | None = None) -> None:
        if placement not in PLACEMENTS:
            raise InputError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
        if name is not None:
            self.name = name
        self.placement: Placement = placement
        self._capacity: tuple[tuple[float, ...], ...] = ()
        self._vector = False
        self._capacity_array = np.zeros((0, 0))

    def attach(self, view: EngineView) -> None:
        super().attach(view)
        self._capacity = view.cluster.machines
        self._vector = len(self._capacity) >= VECTOR_MACHINES
        self._capacity_array = np.array(self._capacity, dtype=float)

    def _free(self) -> Free:
        """A private copy of the engine's free capacity, to charge this pass's decisions against."""
        assert self.view is not None, "attach() first"
        if self._vector:
            return np.array(self.view.free, dtype=float)
        return [list(machine) for machine in self.view.free]

    def _place(self, demand: tuple[float, ...], free: Free) -> int | None:
        """The machine ``demand`` goes to under the placement rule, or None if it fits nowhere."""
        if isinstance(free, np.ndarray):
            fits = (free >= demand).all(axis=1)
            if not fits.any():
                return None
            if self.placement == "first_fit":
                return int(fits.argmax())
            score = ((free - demand) / self._capacity_array).sum(axis=1)
            return int(np.where(fits, score, np.inf).argmin())
        best, best_score = None, 0.0
        for m, room in enumerate(free):
            if all(d <= f for d, f in zip(demand, room, strict=True)):
                if self.placement == "first_fit" or len(free) == 1:
                    return m
                score = sum((f - d) / c for f, d, c in zip(room, demand, self._capacity[m], strict=True))
                if best is None or score < best_score:
                    best, best_score = m, score
        return best

    @staticmethod
    def _charge(demand: tuple[float, ...], free: Free, machine: int) -> None:
        room = free[machine]
        for r, d in enumerate(demand):
            room[r] -= d


class FairShare(_MultiResource):
    """Progressive filling over per-user FIFO queues (``drf``, ``drf_weighted``, ``cpu_fair``,
    ``asset_fair``); see the module docstring.

    ``rule`` is what a share means (``drf``, ``single``, ``asset``); ``weights`` maps users to
    positive weights (absent users weigh 1); ``resource`` names the resource of the ``single`` rule
    (default: the cluster's first); ``strict`` makes a user whose next task does not fit block the
    users with higher shares instead of being skipped. ``name`` defaults to the rule's usual label.

    >>> FairShare().name, FairShare(weights={"A": 2}).name, FairShare("single", resource="mem").name
    ('drf', 'drf_weighted', 'mem_fair')
    """

    def __init__(self, rule: Rule = "drf", weights: Mapping[str, float] | None = None, resource: str | None = None,
                 placement: Placement = "best_fit", strict: bool = False, name: str | None = None) -> None:
        if rule not in RULES:
            raise InputError(f"unknown fairness rule {rule!r}; expected one of {', '.join(RULES)}")
        labels = {"drf": "drf_weighted" if weights else "drf", "single": f"{resource or 'cpu'}_fair",
                  "asset": "asset_fair"}
        super().__init__(placement, name or labels[rule])
        self.strict = bool(strict)
        self.rule: Rule = rule
        self.weights = {u: float(w) for u, w in (weights or {}).items()}
        bad = [u for u, w in self.weights.items() if not w > 0]
        if bad:
            raise InputError(f"{self.name}: user {bad[0]!r} needs a positive weight, got {self.weights[bad[0]]}")
        self.resource = resource
        self._index = 0
        self._total: tuple[float, ...] = ()
        self._queues: dict[str, deque[Job]] = {}
        self._alloc: dict[str, list[float]] = {}
        self._running: dict[str, int] = {}
        self._key: dict[str, float] = {}
        self._fresh: set[str] = set()  # users with a new head task or a new key: candidates next pass
        self._blocked: set[str] = set()  # head task did not fit; candidates again after a completion

    def attach(self, view: EngineView) -> None:
        super().attach(view)
        self._total = view.cluster.total
        resources = view.cluster.resources
        if self.resource is not None and self.resource not in resources:
            raise InputError(f"{self.name}: resource {self.resource!r} is not one of {resources}")
        self._index = 0 if self.resource is None else resources.index(self.resource)

    def share(self, user: str) -> float:
        """``user``'s current share under the rule (unweighted)."""
        alloc = self._alloc.get(user)
        return 0.0 if alloc is None else float(rule_share(alloc, self._total, self.rule, self._index))

    def submit(self, job: Job, now: float) -> None:
        user = job.user
        queue = self._queues.get(user)
        if queue is None:
            queue = self._queues[user] = deque()
            self._alloc[user] = [0.0] * len(self._total)
            self._running[user] = 0
            self._key[user] = 0.0
        queue.append(job)
        if len(queue) == 1:
            self._fresh.add(user)

    def complete(self, job: Job, now: float) -> None:
        user = job.user
        self._running[user] -= 1
        if self._running[user] == 0:
            self._alloc[user] = [0.0] * len(self._total)  # no float residue once a user holds nothing
        else:
            alloc = self._alloc[user]
            for r, d in enumerate(job.demand):
                alloc[r] -= d
        self._rekey(user)
        self._fresh |= self._blocked  # capacity grew: every blocked head may fit again
        self._blocked.clear()
        self._fresh.add(user)

    def _rekey(self, user: str) -> None:
        self._key[user] = self.share(user) / self.weights.get(user, 1.0)

    def schedule(self, now: float) -> Sequence[Start]:
        # Candidates are the users with a new head or key since the last pass, plus, after a
        # completion, the blocked ones; every other backlogged user is still blocked (capacity
        # only shrank). The pass empties the heap: each candidate is granted until its queue
        # empties or its head does not fit. In strict mode a blocked user must still hold back
        # newcomers with higher shares, so every backlogged user is a candidate in every pass.
        if self.strict:
            self._fresh |= self._blocked
            self._blocked.clear()
        heap = [(self._key[u], u) for u in self._fresh if self._queues[u]]
        self._fresh.clear()
        if not heap:
            return []
        heapq.heapify(heap)
        free = self._free()
        starts: list[Start] = []
        while heap:
            _, user = heapq.heappop(heap)
            queue = self._queues[user]
            job = queue[0]
            machine = self._place(job.demand, free)
            if machine is None:
                self._blocked.add(user)
                if self.strict:
                    self._blocked.update(u for _, u in heap)
                    break
                continue
            queue.popleft()
            self._charge(job.demand, free, machine)
            alloc = self._alloc[user]
            for r, d in enumerate(job.demand):
                alloc[r] += d
            self._running[user] += 1
            self._rekey(user)
            starts.append(Start(job, machine))
            if queue:
                heapq.heappush(heap, (self._key[user], user))
        return starts


class FcfsMulti(_MultiResource):
    """``fcfs_multi``: one queue in arrival order; the head blocks everything behind it."""

    name = "fcfs_multi"
    preserves_order = True
    #: The order the invariant checker verifies starts against.
    queue_key = staticmethod(QUEUE_ORDERS["fcfs"])

    def __init__(self, placement: Placement = "best_fit", name: str | None = None) -> None:
        super().__init__(placement, name)
        self._queue: deque[Job] = deque()

    def submit(self, job: Job, now: float) -> None:
        self._queue.append(job)

    def schedule(self, now: float) -> Sequence[Start]:
        if not self._queue:
            return []
        free = self._free()
        starts: list[Start] = []
        while self._queue:
            job = self._queue[0]
            machine = self._place(job.demand, free)
            if machine is None:
                break
            self._queue.popleft()
            self._charge(job.demand, free, machine)
            starts.append(Start(job, machine))
        return starts


__all__ = ["PLACEMENTS", "FairShare", "FcfsMulti", "Placement"]
