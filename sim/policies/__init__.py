"""Scheduling policies, selectable by name (see :data:`POLICIES`)."""

from __future__ import annotations

from collections.abc import Callable

from sim.core import InputError
from sim.policies.backfill import SeedBackfill
from sim.policies.base import EngineView, Policy
from sim.policies.fair_share import asset_fair, cpu_fair, drf, drf_weighted, fcfs_multi
from sim.policies.profile import ProfileBackfill
from sim.policies.queue_order import QUEUE_ORDERS
from sim.policies.rmdcwf import fifo_workflow, rmdcwf

#: name → factory(order) for every policy the simulator offers.
POLICIES: dict[str, Callable[..., Policy]] = {
    "fcfs": lambda order="fcfs": SeedBackfill("fcfs", window="none", order=order),
    "easy": lambda order="fcfs": SeedBackfill("easy", window="head", order=order),
    "conservative": lambda order="fcfs": SeedBackfill("conservative", window="ahead", order=order),
    "easy_classic": lambda order="fcfs": ProfileBackfill("easy_classic", depth=1, order=order),
    "conservative_classic": lambda order="fcfs": ProfileBackfill("conservative_classic", depth=None, order=order),
    # multi-resource fair share (sim/policies/fair_share.py): options placement, weights, resource
    "drf": drf,
    "drf_weighted": drf_weighted,
    "fcfs_multi": fcfs_multi,
    "cpu_fair": cpu_fair,
    "asset_fair": asset_fair,
    # deadline-constrained workflows (sim/policies/rmdcwf.py): RM-DCWF and its FIFO baseline
    "rmdcwf": rmdcwf,
    "fifo_workflow": fifo_workflow,
}


def make_policy(name: str, **options: object) -> Policy:
    """A fresh policy instance by name, e.g. ``make_policy("easy", order="sjf")``.

    ``options`` are the policy's own keyword arguments (``order`` for the backfilling family).
    """
    if name not in POLICIES:
        raise InputError(f"unknown policy {name!r}; expected one of {', '.join(sorted(POLICIES))}")
    order = options.get("order", "fcfs")
    if order not in QUEUE_ORDERS:
        raise InputError(f"unknown queue order {order!r}; expected one of {', '.join(QUEUE_ORDERS)}")
    return POLICIES[name](**options)


__all__ = ["POLICIES", "EngineView", "Policy", "make_policy"]
