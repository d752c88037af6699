"""Static allocator: capacities, per-user task demands and weights → tasks per user.

Progressive filling (the DRF paper's allocation) in two modes:

* ``divisible`` — water-filling: users may hold fractions of tasks; every unfrozen user's
  weighted share rises at the same rate and the users of a resource freeze when it saturates.
  This is the model in which the DRF paper proves its properties.
* ``discrete`` — whole tasks: grant one task at a time to the user with the lowest
  ``(share / weight, name)`` whose next task still fits; a user whose next task does not fit is
  done (capacity only shrinks). This is what the online ``drf`` policy does at every instant.
  (The paper's Algorithm 1 stops at the first task that does not fit; we skip that user and go
  on, as "grant to the lowest share whose next task fits" says.)

All arithmetic is exact (:class:`~fractions.Fraction`), so ties and saturation are exact too.

The seed's running example (9 CPU, 18 GB; A's tasks (1, 4), B's (3, 1)) gives A 3 tasks and B 2
with dominant shares 2/3 each in both modes.

Which of the paper's properties hold (for ``rule="drf"``; ``w`` weights, ``W = Σ w``, ``c_u`` the
dominant share of one task of u, ``x_u`` tasks, ``d_u`` dominant share). Each form below is a
hypothesis test in ``tests/test_drf_properties.py``; each failure is a named counterexample there:

=====================  ================================  =========================================
property               divisible                         discrete (whole tasks)
=====================  ================================  =========================================
sharing incentive      ``d_i ≥ w_i / W``                 fails; holds up to one task of *every*
                                                         user: ``d_i ≥ (w_i / W)(1 − Σ_u c_u)``
envy-freeness          i cannot run more than ``x_i``    fails; holds up to one task (EF1): i
                       tasks with ``(w_i/w_j)·x_j·D_j``  cannot run more than ``x_i`` tasks with
                                                         ``(w_i/w_j)(x_j − 1)·D_j`` when
                                                         ``w_i ≤ w_j`` (fails for ``w_i > w_j``)
Pareto efficiency      every user uses a saturated       holds: no user's next task fits in what
                       resource                          is left (so no Pareto-improving
                                                         reallocation of whole tasks exists)
strategy-proofness     declaring ``D' ≥ D`` never        fails, by more than one task: there is
                       yields more than ``x_i`` tasks    no "up to one task" form
                       of the true demand
=====================  ================================  =========================================

Counterexamples (capacities, demands per user; unit weights unless stated):

* sharing incentive — (3 CPU, 4 GB), A (2, 4), B (1, 2): the tie goes to A, whose one task takes
  all the memory; B gets 0 tasks although half the cluster (1.5, 2) holds one B task. Losing
  more than one task: (12, 7), A (3, 3), B (4, 4), C (2, 1): C gets 0, its third of the
  cluster holds 2.
* envy-freeness — the same (3, 4) instance: B envies A, whose (2, 4) would hold two B tasks.
  Weighted EF1 with ``w_i > w_j``: one resource of 29, A 7 (weight 2), B 2, C 7, D 5: A gets 1
  task and is blocked, B keeps filling the fragments to 5 tasks (10 units); twice B's allocation
  minus one task (16 units) holds 2 A tasks.
* strategy-proofness — (10 CPU, 10 GB), A (3, 4), B (2, 1): honest B gets 2 tasks; declaring
  (2, 2) it gets 3, because its padded memory blocks A's second task. By two tasks: (8, 7),
  A (0, 1), B (3, 2): A gets 3 honestly, 5 by declaring (1, 1) — the padded CPU blocks B.

Why the discrete forms hold: say user i is done at moment T, its next task not fitting on a
resource r it uses. Every task another user j got before T was granted while j's weighted share
was at most i's final one, so at T j's dominant share is at most ``w_j · d_i / w_i + c_j``; and
whatever j gets after T fits in what was left of r, less than i's demand on r. Summing the
shares of r at T gives the sharing-incentive bound; comparing j's holding of r and of i's
dominant resource with i's gives EF1 when ``w_i ≤ w_j``.

The baselines fail even the divisible forms: asset fairness breaks sharing incentive — (30, 30),
A (1, 1), B (3, 1) gives A 12 tasks in both modes where its half of the cluster holds 15 (DRF
gives 15) — and CPU-only fairness (``rule="single"``) lets a memory-heavy user monopolise memory
— (12, 12), A (1, 3), B (2, 2) gives A 3 tasks holding 3/4 of the memory and B 1 task (1.5
divisible) where its half of the cluster holds 3 (DRF: A 2, B 3).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from sim.core import InputError
from sim.fairness.shares import RULES, Rule, dominant_share, rule_share

Mode = Literal["discrete", "divisible"]
MODES: tuple[Mode, ...] = ("discrete", "divisible")
Number = int | float | Fraction


@dataclass(frozen=True, slots=True)
class Allocation:
    """The outcome of :func:`allocate`, exact (every number is a :class:`~fractions.Fraction`).

    ``tasks[u]`` is a whole number in discrete mode and may be fractional in divisible mode;
    ``grants`` is the order in which whole tasks were granted (discrete mode only).
    """

    capacity: tuple[Fraction, ...]
    demands: Mapping[str, tuple[Fraction, ...]]
    weights: Mapping[str, Fraction]
    tasks: Mapping[str, Fraction]
    rule: Rule = "drf"
    mode: Mode = "discrete"
    grants: tuple[str, ...] = ()

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(self.demands)

    def vector(self, user: str) -> tuple[Fraction, ...]:
        """The resources ``user`` holds: its task count times its demand."""
        n = self.tasks[user]
        return tuple(n * d for d in self.demands[user])

    @property
    def used(self) -> tuple[Fraction, ...]:
        """Capacity allocated, per resource."""
        return tuple(sum((self.vector(u)[r] for u in self.users), Fraction(0)) for r in range(len(self.capacity)))

    @property
    def dominant_shares(self) -> dict[str, Fraction]:
        """Each user's (unweighted) dominant share."""
        return {u: dominant_share(self.vector(u), self.capacity) for u in self.users}


def allocate(
    capacity: Sequence[Number],
    demands: Mapping[str, Sequence[Number]],
    weights: Mapping[str, Number] | None = None,
    *,
    rule: Rule = "drf",
    mode: Mode = "discrete",
    resource: int = 0,
) -> Allocation:
    """Progressive filling of ``capacity`` among users with one task shape each.

    ``rule`` picks the share being equalised (``drf``: dominant share, ``asset``: sum of shares,
    ``single``: the share of ``capacity[resource]``), divided by the user's weight (default 1).
    ``discrete`` grants whole tasks, one at a time, to the user with the lowest
    ``(share / weight, name)`` whose next task fits, until none fits; ``divisible`` raises every
    unfrozen user's share at the same rate and freezes the users of each resource that saturates.

    >>> a = allocate((9, 18), {"A": (1, 4), "B": (3, 1)})
    >>> dict(a.tasks), a.dominant_shares["A"], a.dominant_shares["B"], a.grants
    ({'A': Fraction(3, 1), 'B': Fraction(2, 1)}, Fraction(2, 3), Fraction(2, 3), ('A', 'B', 'A', 'B', 'A'))
    """
    cap, dem, wts = _validated(capacity, demands, weights, rule, mode, resource)
    if mode == "discrete":
        tasks, grants = _discrete(cap, dem, wts, rule, resource)
        return Allocation(cap, dem, wts, tasks, rule, mode, grants)
    return Allocation(cap, dem, wts, _divisible(cap, dem, wts, rule, resource), rule, mode)


def _discrete(
    cap: tuple[Fraction, ...], dem: dict[str, tuple[Fraction, ...]], wts: dict[str, Fraction], rule: Rule,
    resource: int,
) -> tuple[dict[str, Fraction], tuple[str, ...]]:
    step = {u: rule_share(d, cap, rule, resource) / wts[u] for u, d in dem.items()}
    free = list(cap)
    count = dict.fromkeys(dem, 0)
    heap = [(Fraction(0), u) for u in sorted(dem)]
    grants: list[str] = []
    while heap:
        key, user = heapq.heappop(heap)
        demand = dem[user]
        if any(d > f for d, f in zip(demand, free, strict=True)):
            continue  # capacity only shrinks: this user is done for good
        for r, d in enumerate(demand):
            free[r] -= d
        count[user] += 1
        grants.append(user)
        heapq.heappush(heap, (key + step[user], user))
    return {u: Fraction(n) for u, n in count.items()}, tuple(grants)


def _divisible(
    cap: tuple[Fraction, ...], dem: dict[str, tuple[Fraction, ...]], wts: dict[str, Fraction], rule: Rule,
    resource: int,
) -> dict[str, Fraction]:
    # Water-filling: at level t an active user holds t * w / cost tasks (its weighted share is t).
    rate = {u: wts[u] / rule_share(d, cap, rule, resource) for u, d in dem.items()}
    tasks = dict.fromkeys(dem, Fraction(0))
    used = [Fraction(0)] * len(cap)
    active = set(dem)
    while active:
        speed = [sum((rate[u] * dem[u][r] for u in active), Fraction(0)) for r in range(len(cap))]
        rises = {r: (cap[r] - used[r]) / s for r, s in enumerate(speed) if s > 0}
        rise = min(rises.values())
        for u in active:
            tasks[u] += rise * rate[u]
        for r, s in enumerate(speed):
            used[r] += rise * s
        full = {r for r, dt in rises.items() if dt == rise}
        active -= {u for u in active if any(dem[u][r] > 0 for r in full)}
    return tasks


def _validated(
    capacity: Sequence[Number], demands: Mapping[str, Sequence[Number]], weights: Mapping[str, Number] | None,
    rule: Rule, mode: Mode, resource: int,
) -> tuple[tuple[Fraction, ...], dict[str, tuple[Fraction, ...]], dict[str, Fraction]]:
    if rule not in RULES:
        raise InputError(f"unknown fairness rule {rule!r}; expected one of {', '.join(RULES)}")
    if mode not in MODES:
        raise InputError(f"unknown allocation mode {mode!r}; expected one of {', '.join(MODES)}")
    cap = tuple(Fraction(c) for c in capacity)
    if not cap or any(c <= 0 for c in cap):
        raise InputError(f"capacity {tuple(capacity)} must be a non-empty vector of positive numbers")
    if not 0 <= resource < len(cap):
        raise InputError(f"resource index {resource} is outside the capacity vector {tuple(capacity)}")
    if not demands:
        raise InputError("no users to allocate to")
    dem: dict[str, tuple[Fraction, ...]] = {}
    for user, demand in demands.items():
        vec = tuple(Fraction(d) for d in demand)
        if len(vec) != len(cap) or any(d < 0 for d in vec) or not any(vec):
            raise InputError(f"user {user!r}: demand {tuple(demand)} must be {len(cap)} non-negative numbers, "
                             "not all zero")
        if mode == "divisible" and rule == "single" and vec[resource] == 0:
            raise InputError(f"user {user!r}: divisible single-resource fairness needs a positive demand on "
                             f"resource {resource}")
        dem[user] = vec
    weights = weights or {}
    unknown = set(weights) - set(dem)
    if unknown:
        raise InputError(f"weights for unknown users {sorted(unknown)}")
    wts = {u: Fraction(weights.get(u, 1)) for u in dem}
    bad = [u for u, w in wts.items() if w <= 0]
    if bad:
        raise InputError(f"user {bad[0]!r}: weight must be positive, got {weights[bad[0]]}")
    return cap, dem, wts
