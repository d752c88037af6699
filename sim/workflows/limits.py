"""Bounds on workflow inputs, so a typo ends in one clear line instead of a run that never finishes
(``"m": 1000000000`` builds per-resource state) or numbers that are silently wrong (at t = 1e300
adding a run time changes nothing, so a child "starts" with its parent).

Generous next to the RM-DCWF defaults (m = 50 resources × c_r = 2 slots, workflows of 50 tasks):

* :data:`MAX_RESOURCES` = 100,000 resources (m) and :data:`MAX_SLOTS` = 1,000 slots per resource (c_r);
* :data:`MAX_TASKS` = 100,000 tasks per workflow;
* :data:`MAX_PLANNING_WORK` = 10^8 for a workflow's tasks × min(tasks, m × c_r): placing a task visits
  each slot in use (:mod:`sim.workflows.calendar`), so this product bounds the planning of a wide
  workflow — about two minutes on a 2-core machine (100,000 tasks on up to 1,000 slots take ~20 s
  on 100; 10,000 tasks fit any system);
* every time (arrival, earliest start, deadline, run time) in [0, :data:`MAX_SECONDS`] = [0, 1e10] s,
  the trace readers' bound (:mod:`sim.workloads.errors`).
"""

from __future__ import annotations

import math

from sim.core import InputError
from sim.workloads.errors import MAX_SECONDS, time_error

MAX_RESOURCES = 100_000
MAX_SLOTS = 1_000
MAX_TASKS = 100_000
MAX_PLANNING_WORK = 100_000_000

__all__ = ["MAX_PLANNING_WORK", "MAX_RESOURCES", "MAX_SECONDS", "MAX_SLOTS", "MAX_TASKS", "check_size",
           "check_system", "check_tasks", "check_time"]


def check_system(m: int, c_r: int, prefix: str = "", quote: str = "") -> None:
    """Refuse more than :data:`MAX_RESOURCES` resources (m) or :data:`MAX_SLOTS` slots per resource
    (c_r); the message names the field ``{prefix}{quote}m{quote}`` (``cluster.m``, ``FILE: 'm'``)."""
    for field, value, limit, what in (("m", m, MAX_RESOURCES, "resources"),
                                      ("c_r", c_r, MAX_SLOTS, "slots per resource")):
        if value > limit:
            raise InputError(f"{prefix}{quote}{field}{quote} must be at most {limit:,} ({what}, sim.workflows.limits), "
                             f"got {value!r}")


def check_tasks(tasks: int, where: str) -> None:
    """Refuse a workflow of more than :data:`MAX_TASKS` tasks."""
    if tasks > MAX_TASKS:
        raise InputError(f"{where}: {tasks:,} tasks; a workflow may have at most {MAX_TASKS:,} "
                         f"(sim.workflows.limits.MAX_TASKS)")


def check_size(tasks: int, machines: int, slots: int, where: str) -> None:
    """Refuse a workflow of more than :data:`MAX_TASKS` tasks, or one too large to plan on
    ``machines`` × ``slots`` in reasonable time (:data:`MAX_PLANNING_WORK`)."""
    check_tasks(tasks, where)
    total = machines * slots
    work = tasks * min(tasks, total)
    if work > MAX_PLANNING_WORK:
        most = min(MAX_TASKS, math.isqrt(MAX_PLANNING_WORK) if total ** 2 >= MAX_PLANNING_WORK
                   else MAX_PLANNING_WORK // total)
        raise InputError(f"{where}: {tasks:,} tasks on m × c_r = {total:,} slots are too many to plan in "
                         f"reasonable time: planning visits up to tasks × min(tasks, slots) = {work:,} slots, at "
                         f"most {MAX_PLANNING_WORK:,} (sim.workflows.limits): up to {most:,} tasks fit this system")


def check_time(value: float, where: str, field: str) -> float:
    """``value`` (a number ≥ 0, checked by the caller) if it is at most :data:`MAX_SECONDS`, else the trace
    readers' message for a time out of range."""
    if not value <= MAX_SECONDS:
        raise time_error(where, field, repr(value))
    return value
