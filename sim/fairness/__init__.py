"""Multi-resource fairness: Dominant Resource Fairness and the allocations it is compared with.

* :mod:`sim.fairness.shares` — what a share is under each fairness rule (dominant, asset,
  single resource);
* :mod:`sim.fairness.static` — the static allocator (capacities, per-user demands, weights →
  tasks per user) by progressive filling, in a discrete (whole tasks) and a divisible mode;
* :mod:`sim.fairness.metrics` — pure functions of a simulation result: dominant-share timeline,
  time-weighted shares, Jain's index, utilisation, waits.

The online policies live in :mod:`sim.policies.fair_share`; the workloads in
:mod:`sim.workloads.multires`.
"""

from sim.fairness.metrics import dominant_share_timeline, fairness_summary, jain_index
from sim.fairness.shares import RULES, dominant_share, rule_share
from sim.fairness.static import Allocation, allocate

__all__ = [
    "RULES",
    "Allocation",
    "allocate",
    "dominant_share",
    "dominant_share_timeline",
    "fairness_summary",
    "jain_index",
    "rule_share",
]
