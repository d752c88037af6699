"""Scheduling policies, selectable by name (see :data:`POLICIES`).

The fair-share and workflow families are imported on first use: they pull in numpy and the
RM-DCWF planner, which replaying a trace with a backfilling policy never needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from sim.core import InputError
from sim.policies.backfill import SeedBackfill
from sim.policies.base import EngineView, Policy
from sim.policies.profile import ProfileBackfill
from sim.policies.queue_order import QUEUE_ORDERS


def _lazy(module: str, name: str) -> Callable[..., Policy]:
    """The factory ``module.name``, imported when first called."""
    def factory(**options: object) -> Policy:
        return getattr(importlib.import_module(module), name)(**options)
    factory.__name__ = factory.__qualname__ = name
    return factory


#: name → factory(order) for every policy the simulator offers.
POLICIES: dict[str, Callable[..., Policy]] = {
    "fcfs": lambda order="fcfs": SeedBackfill("fcfs", window="none", order=order),
    "easy": lambda order="fcfs": SeedBackfill("easy", window="head", order=order),
    "conservative": lambda order="fcfs": SeedBackfill("conservative", window="ahead", order=order),
    "easy_classic": lambda order="fcfs": ProfileBackfill("easy_classic", depth=1, order=order),
    "conservative_classic": lambda order="fcfs": ProfileBackfill("conservative_classic", depth=None, order=order),
    # multi-resource fair share (sim/policies/fair_share.py): options placement, weights, resource
    "drf": _lazy("sim.policies.fair_share", "drf"),
    "drf_weighted": _lazy("sim.policies.fair_share", "drf_weighted"),
    "fcfs_multi": _lazy("sim.policies.fair_share", "fcfs_multi"),
    "cpu_fair": _lazy("sim.policies.fair_share", "cpu_fair"),
    "asset_fair": _lazy("sim.policies.fair_share", "asset_fair"),
    # deadline-constrained workflows (sim/policies/rmdcwf.py): RM-DCWF and its FIFO baseline
    "rmdcwf": _lazy("sim.policies.rmdcwf", "rmdcwf"),
    "fifo_workflow": _lazy("sim.policies.rmdcwf", "fifo_workflow"),
    # MRCP-RM (sim/policies/mrcp.py): a CP-SAT model re-planned on every arrival (needs schedlab[mrcp])
    "mrcp": _lazy("sim.policies.mrcp", "mrcp"),
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
